#!/usr/bin/env python3
"""The CPU backend's AVX code calls no legacy-SSE code (ctest: cpu_sse_transitions).

Highway compiles the CPU backend once per target; the AVX2 and AVX-512 copies use VEX/EVEX
encodings. A function they call out of line that was compiled for the baseline target (the shared
scalar math of src/math, core/elements.h) is in legacy SSE encoding, and its first SSE
instruction, while the upper halves of the vector registers are dirty, is a state transition:
170-194 ns on the development VM (tests/bench/cpu_vector_ports.c; a 1 x 64 x 8192 group-128 call went from 0.18 to 0.93 ms when
math::dynamic_scale stopped being inlined). So the shared math is always inlined on the host
(FN_HD, src/math/quant_math.h), and this test reads the disassembly of libfusednorm.so
(objdump -d) and fails naming every direct call from an AVX2 / AVX-512 function
(namespace N_AVX2, N_AVX3...) to a function of the library that executes an SSE instruction
without VEX (a mnemonic without the v prefix on an xmm register). Calls through the PLT (libc's
memcpy and memset dispatch to AVX code themselves; sqrtf is reached only for a negative or NaN
argument) are not followed.

Usage: sse_transitions.py LIBRARY
"""
import re
import shutil
import subprocess
import sys

AVX_NAMESPACE = re.compile(r"\bN_AVX[0-9A-Z_]*::")
FUNC = re.compile(r"^[0-9a-f]+ <(.*)>:$")
CALL = re.compile(r"^call\s+[0-9a-f]+ <(.*)>$")


def functions(library):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", library], check=True,
                         capture_output=True, text=True).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = FUNC.match(line)
        if m:
            cur = m.group(1)
            funcs[cur] = []
        elif cur is not None and "\t" in line:
            funcs[cur].append(line.split("\t", 1)[1].strip())
    return funcs


def legacy_sse(body):
    for ins in body:
        mnemonic = ins.split(None, 1)[0] if ins else ""
        if "%xmm" in ins and not mnemonic.startswith("v"):
            return ins
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if shutil.which("objdump") is None:
        print("FUSEDNORM_SKIP: objdump not found (binutils)")
        return 0
    funcs = functions(sys.argv[1])
    avx = [f for f in funcs if AVX_NAMESPACE.search(f)]
    if not avx:
        print("FUSEDNORM_SKIP: no AVX2 / AVX-512 target compiled into %s" % sys.argv[1])
        return 0
    bad = {}
    for f in avx:
        for ins in funcs[f]:
            m = CALL.match(ins)
            if not m or "@plt" in m.group(1) or AVX_NAMESPACE.search(m.group(1)):
                continue
            sse = legacy_sse(funcs.get(m.group(1), []))
            if sse:
                bad.setdefault((m.group(1), sse), set()).add(f)
    print("%d AVX2 / AVX-512 functions read" % len(avx))
    for (callee, sse), callers in sorted(bad.items()):
        print("FAIL: %s (executes '%s') is called from %d AVX functions, e.g. %s"
              % (callee, sse, len(callers), sorted(callers)[0][:200]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
