/* The CPU's vector throughput, for the instruction bound of the CPU backend's row passes
 * (docs/performance.md, "Known limits"): 512-bit multiplies and integer adds per second with
 * eight independent chains (throughput), and a dependent chain of 512-bit integer adds (one a
 * cycle: the core's clock). Then the price of a call to legacy-SSE code after AVX-512 code left
 * the upper halves of the vector registers dirty, with and without vzeroupper (why the shared
 * math is always inlined: FN_HD, src/math/quant_math.h). x86-64 with AVX-512 only.
 *   cc -O2 -o /tmp/cpu_vector_ports tests/bench/cpu_vector_ports.c && /tmp/cpu_vector_ports
 */
#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

#define EIGHT_CHAINS(op)                                                                            \
  op " %%zmm8,%%zmm0,%%zmm0\n\t" op " %%zmm8,%%zmm1,%%zmm1\n\t" op " %%zmm8,%%zmm2,%%zmm2\n\t" op \
     " %%zmm8,%%zmm3,%%zmm3\n\t" op " %%zmm8,%%zmm4,%%zmm4\n\t" op " %%zmm8,%%zmm5,%%zmm5\n\t" op  \
     " %%zmm8,%%zmm6,%%zmm6\n\t" op " %%zmm8,%%zmm7,%%zmm7\n\t"
#define ONE_CHAIN(op) op " %%zmm8,%%zmm0,%%zmm0\n\t"

#define TIME(label, body)                                                                   \
  do {                                                                                      \
    double best = 1e30;                                                                     \
    for (int round = 0; round < 5; ++round) {                                               \
      const double t0 = now();                                                              \
      for (long i = 0; i < n; ++i)                                                          \
        __asm__ volatile(body ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7"); \
      const double t = now() - t0;                                                          \
      if (t < best) best = t;                                                               \
    }                                                                                       \
    printf("%-44s %6.2f G instructions/s\n", label, n * 8 / best / 1e9);                    \
  } while (0)

/* Legacy-SSE code, as the baseline target compiles the shared math. */
__attribute__((noinline)) static float sse_call(float a, float b) {
  float r;
  __asm__ volatile("movss %1,%0\n\tminss %2,%0\n\tdivss %2,%0" : "=&x"(r) : "x"(a), "x"(b));
  return r;
}

#define TIME_CALL(label, before)                                                      \
  do {                                                                                \
    const int calls = 200000;                                                         \
    float sum = 0.0f;                                                                 \
    const double t0 = now();                                                          \
    for (int i = 0; i < calls; ++i) {                                                 \
      __asm__ volatile(before ::: "xmm0");                                            \
      sum += sse_call((float)i, 3.0f);                                                \
    }                                                                                 \
    printf("%-44s %6.1f ns a call (%g)\n", label, (now() - t0) / calls * 1e9, (double)sum); \
  } while (0)

int main(void) {
  const long n = 50000000;
  __asm__ volatile("vpxord %%zmm8,%%zmm8,%%zmm8" ::: "xmm8");
  TIME("vmulps zmm, 8 independent chains", EIGHT_CHAINS("vmulps"));
  TIME("vpaddd zmm, 8 independent chains", EIGHT_CHAINS("vpaddd"));
  TIME("vpaddd zmm, one dependent chain (= GHz)",
       ONE_CHAIN("vpaddd") ONE_CHAIN("vpaddd") ONE_CHAIN("vpaddd") ONE_CHAIN("vpaddd")
       ONE_CHAIN("vpaddd") ONE_CHAIN("vpaddd") ONE_CHAIN("vpaddd") ONE_CHAIN("vpaddd"));
  __asm__ volatile("vzeroupper");
  TIME_CALL("SSE call, upper halves clean", "nop");
  TIME_CALL("SSE call, upper halves of zmm0 dirty", "vpternlogd $0xff,%%zmm0,%%zmm0,%%zmm0");
  TIME_CALL("SSE call, dirty, then vzeroupper", "vpternlogd $0xff,%%zmm0,%%zmm0,%%zmm0\n\tvzeroupper");
  return 0;
}
