/** @file fusednorm.h
 * @brief fusednorm: fused RMSNorm + quantization kernels. The C ABI.
 *
 * Conventions (every entry point):
 * - returns a fusednorm_status; on failure fusednorm_last_error() holds a message naming the
 *   argument and the values, for the calling thread, until its next failing call;
 * - nothing aborts, exits or throws across this boundary; a failing call writes nothing;
 * - tensors are DLPack DLTensors: shape and strides in elements (strides NULL = compact
 *   row-major), 64-bit everywhere; the last dimension must be contiguous (stride 1);
 * - the device of the tensors picks the backend (kDLCPU, kDLCUDA, kDLROCM); `stream` is the
 *   caller's cudaStream_t / hipStream_t (NULL = default stream) and is ignored on the CPU, where
 *   work runs on the caller's oneTBB arena;
 * - option structs begin with `struct_size` (set by the *_init function) so they can grow; an
 *   options pointer may be NULL, which means the defaults that the *_init function sets (listed
 *   with each struct below);
 * - aliasing: no two tensors of a call may share a byte of memory. The only in-place forms are the
 *   residuals of fusednorm_rmsnorm_quant and fusednorm_rmsnorm_fp4 and q of
 *   fusednorm_mla_rope_rmsnorm_quant (q_out NULL), each one tensor both read and written, and the
 *   outputs of qk_rmsnorm passed as their input (the very same view). A tensor's bytes are
 *   [data + byte_offset, one past the last byte of its last element), from its shape, strides and
 *   dtype (f4e2m1: two elements a byte); an empty tensor (a zero dimension) has none. The check is
 *   by range intersection, so two interleaved views of one buffer (e.g. even and odd rows) are
 *   rejected too when their ranges intersect. A tensor the call writes must not overlap itself
 *   either (e.g. output [4, 128] with strides {64, 1}, or a stride of 0). Either is
 *   INVALID_ARGUMENT, with a message naming the tensor(s) and their byte ranges;
 * - statuses: SUCCESS; INVALID_ARGUMENT (a malformed call: NULL, shape, dtype mismatch, device
 *   mismatch, range, overlapping memory, overflowing sizes); UNSUPPORTED (well-formed but not
 *   implemented: dtype, negative or non-contiguous strides, rank above 9, option combination);
 *   BACKEND_UNAVAILABLE (GPU tensors without a loadable plugin or device); DEVICE_ERROR (the
 *   vendor runtime failed); INTERNAL_ERROR (a bug). The validation (everything but the last
 *   three) comes first, and on any failure nothing has been written.
 *
 * The arithmetic of every operation is defined bit for bit in docs/numerics.md.
 */
#ifndef FUSEDNORM_FUSEDNORM_H_
#define FUSEDNORM_FUSEDNORM_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

/** Marks the entry points: exported from libfusednorm.so (default visibility) when the library
 * is built, nothing for its callers. */
#if defined(FUSEDNORM_BUILDING_LIBRARY)
#define FUSEDNORM_API __attribute__((visibility("default")))
#else
#define FUSEDNORM_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define FUSEDNORM_VERSION_MAJOR 0 /**< this header's version (fusednorm_version(): the library's) */
#define FUSEDNORM_VERSION_MINOR 1 /**< this header's minor version */
#define FUSEDNORM_VERSION_PATCH 0 /**< this header's patch version */

/** DLPack 1.1 type codes for FP8/FP4/E8M0. Debian 12 ships DLPack 0.6, which lacks them; the
 * values are DLPack 1.1's, so tensors exported by PyTorch/JAX/CuPy pass through unchanged. */
#if !defined(DLPACK_MAJOR_VERSION) || (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 1)
enum {
  kDLFloat8_e4m3 = 8,      /**< f8e4m3: IEEE-like, with Inf; largest finite 240 */
  kDLFloat8_e4m3fn = 10,   /**< f8e4m3fn: no Inf; largest finite 448 */
  kDLFloat8_e4m3fnuz = 11, /**< f8e4m3fnuz: no Inf, no -0; largest finite 240 */
  kDLFloat8_e5m2 = 12,     /**< f8e5m2: IEEE-like; largest finite 57344 */
  kDLFloat8_e5m2fnuz = 13, /**< f8e5m2fnuz: no Inf, no -0; largest finite 57344 */
  kDLFloat8_e8m0fnu = 14,  /**< e8m0: a power of two 2^-127..2^127 (scales), 0xFF is NaN */
  kDLFloat4_e2m1fn = 17    /**< f4e2m1: 4 bits, largest finite 6; two a byte, low nibble first */
};
#endif

/** What every entry point returns (see the conventions above). */
typedef enum fusednorm_status {
  FUSEDNORM_SUCCESS = 0,             /**< the call ran; its outputs are written */
  FUSEDNORM_INVALID_ARGUMENT = 1,    /**< the call is malformed: null, shape, dtype, range */
  FUSEDNORM_UNSUPPORTED = 2,         /**< well-formed, but this combination is not implemented */
  FUSEDNORM_BACKEND_UNAVAILABLE = 3, /**< no plugin / runtime / driver / device for the device */
  FUSEDNORM_DEVICE_ERROR = 4,        /**< the vendor runtime failed; message has its text */
  FUSEDNORM_INTERNAL_ERROR = 5       /**< a bug in fusednorm: please report the message */
} fusednorm_status;

/** Message of the last failure on the calling thread ("" if none). Valid until the next call. */
FUSEDNORM_API const char* fusednorm_last_error(void);
/** Constant name of a status, e.g. "INVALID_ARGUMENT". */
FUSEDNORM_API const char* fusednorm_status_string(fusednorm_status status);

/* ---------------------------------------------------------------- queries */
/** @defgroup queries Queries
 * The library's version, its backends (and why one is unavailable), the CPU's SIMD target.
 * @{ */

/** Library version ("0.1.0") and its components. Any pointer may be NULL. */
FUSEDNORM_API const char* fusednorm_version(int* major, int* minor, int* patch);

/** One backend: fusednorm_query_backend() fills it. */
typedef struct fusednorm_backend_info {
  size_t struct_size;     /**< in: sizeof(fusednorm_backend_info) */
  int32_t device_type;    /**< out: kDLCPU, kDLCUDA or kDLROCM */
  int32_t available;      /**< out: 1 if calls on this device type can run */
  int32_t device_count;   /**< out: devices of this type (CPU: 1) */
  char name[32];          /**< out: "cpu", "cuda", "hip" */
  char detail[512];       /**< out: CPU: SIMD target and threads; unavailable: the reason (loader
                             or vendor text) */
} fusednorm_backend_info;

/** Fills `info` for `device_type` (kDLCPU, kDLCUDA, kDLROCM). Returns INVALID_ARGUMENT for other
 * device types or a NULL/short struct; an unavailable backend is not an error (available = 0). */
FUSEDNORM_API fusednorm_status fusednorm_query_backend(int32_t device_type,
                                                       fusednorm_backend_info* info);

/** Name of the Highway target the CPU backend dispatches to now ("AVX3", "AVX2", "SSE4", ...). */
FUSEDNORM_API const char* fusednorm_cpu_target(void);
/** @} */

/* ---------------------------------------------------------------- cast */
/** @defgroup cast cast
 * Any supported dtype to any other with the library's encoders.
 * @{ */

/** How fusednorm_cast encodes e8m0 (scales written by the operations always round up). */
typedef enum fusednorm_e8m0_rounding {
  FUSEDNORM_E8M0_NEAREST = 0, /**< enc_e8m0_rn: nearest power of two, ties up */
  FUSEDNORM_E8M0_UP = 1       /**< enc_e8m0_up: smallest power of two >= v */
} fusednorm_e8m0_rounding;

/** Options of fusednorm_cast(); fusednorm_cast_options_init() sets the defaults. */
typedef struct fusednorm_cast_options {
  size_t struct_size;    /**< sizeof(fusednorm_cast_options), set by the init function */
  int32_t e8m0_rounding; /**< fusednorm_e8m0_rounding, used when dst is e8m0; default NEAREST */
} fusednorm_cast_options;

/** Sets the defaults (also what options = NULL means): struct_size, e8m0_rounding = NEAREST. */
FUSEDNORM_API void fusednorm_cast_options_init(fusednorm_cast_options* options);

/** dst = enc_dst(dec_src(src)) element-wise with the library's encoders (docs/numerics.md §1).
 * src, dst: same shape, on the same device; dtypes any of f32, f16, bf16, int8, the five FP8
 * formats, f4e2m1 (two per byte, low nibble first; last dimension even, compact rows) and e8m0.
 * NaN keeps its sign where the destination has a signed NaN. options may be NULL (defaults).
 * src and dst must not overlap (there is no in-place cast), and dst's elements must not overlap
 * each other. Empty tensors (any dimension 0, a 0-length last dimension included) are a valid
 * call that writes nothing (data may then be NULL).
 * Returns INVALID_ARGUMENT (null, shape, device, overlapping memory, overflowing sizes) or
 * UNSUPPORTED (dtype, negative or non-contiguous strides, rank above 9), and writes nothing. */
FUSEDNORM_API fusednorm_status fusednorm_cast(const DLTensor* src, DLTensor* dst,
                                              const fusednorm_cast_options* options,
                                              void* stream);
/** @} */

/* ---------------------------------------------------------------- rmsnorm_quant */
/** @defgroup rmsnorm_quant rmsnorm_quant
 * RMSNorm (or quant only) followed by FP8/INT8 quantization with static, per-row or per-group
 * scales.
 * @{ */

/** The normalization before the quantization (rmsnorm_quant, rmsnorm_fp4). */
typedef enum fusednorm_norm {
  FUSEDNORM_NORM_RMS = 0, /**< y = (x * inv_rms) * (weight + weight_offset) */
  FUSEDNORM_NORM_NONE = 1 /**< quant only: y = x (weight, eps, weight_offset unused) */
} fusednorm_norm;

/** Where rmsnorm_quant's scales come from, and how many there are. */
typedef enum fusednorm_scale_mode {
  FUSEDNORM_SCALE_STATIC = 0,        /**< `scales` is an input: one f32 dequant scale [1] */
  FUSEDNORM_SCALE_DYNAMIC_ROW = 1,   /**< one scale per row, written to `scales` [..., 1] */
  FUSEDNORM_SCALE_DYNAMIC_GROUP = 2  /**< one per group of group_size along H: [..., H/G] */
} fusednorm_scale_mode;

/** Where rmsnorm_quant's dynamic scales are written. */
typedef enum fusednorm_scale_placement {
  FUSEDNORM_SCALES_TENSOR = 0,       /**< in `scales`; any 64-bit strides (row- or column-major) */
  FUSEDNORM_SCALES_PACKED_ROW_END = 1 /**< f32 scale little-endian in bytes H..H+3 of each output
                                        row (AWS NKI layout); output last dim is H + 4;
                                        DYNAMIC_ROW only; `scales` must be NULL */
} fusednorm_scale_placement;

/** Options of fusednorm_rmsnorm_quant(); fusednorm_rmsnorm_quant_options_init() sets the
 * defaults. */
typedef struct fusednorm_rmsnorm_quant_options {
  size_t struct_size;      /**< sizeof(fusednorm_rmsnorm_quant_options), set by the init function */
  int32_t norm;            /**< fusednorm_norm; default RMS */
  int32_t scale_mode;      /**< fusednorm_scale_mode; default DYNAMIC_ROW */
  int32_t scale_placement; /**< fusednorm_scale_placement; default TENSOR */
  int32_t reserved0;       /**< must be 0 */
  int64_t group_size;      /**< DYNAMIC_GROUP: 32, 64 or 128; H % group_size == 0 */
  float eps;               /**< >= 0; default 1e-6 */
  float weight_offset;     /**< added to each weight (1 for Gemma); default 0 */
  float scale_ub;          /**< dynamic: upper bound on max|y| before the scale; +inf = none
                              (default); must be > 0 */
  float min_scale;         /**< dynamic: lower bound on the scale; default 0; must be >= 0 */
  float qmax;              /**< 0 = the format's largest finite (448, 240, 57344, 127);
                              else 0 < qmax <= that */
} fusednorm_rmsnorm_quant_options;

/** Sets the defaults (also what options = NULL means): struct_size, norm = RMS, scale_mode =
 * DYNAMIC_ROW, scale_placement = TENSOR, group_size = 128 (read only by DYNAMIC_GROUP), eps =
 * 1e-6, weight_offset = 0, scale_ub = +inf, min_scale = 0, qmax = 0 (the format's largest). */
FUSEDNORM_API void fusednorm_rmsnorm_quant_options_init(fusednorm_rmsnorm_quant_options* options);

/** RMSNorm (or quant only) followed by FP8/INT8 quantization (docs/numerics.md §3.1).
 * @param input    [..., H]  f32, f16 or bf16; in
 * @param residual [..., H]  NULL, or same shape and dtype as input; in/out: x = input + residual
 *                 is rounded to the input dtype, written back here, and normalized
 * @param weight   [H]  f32, f16 or bf16 (gamma); in; NULL only with norm = NONE (with NONE it is
 *                 not read, not validated and not checked for overlap). Its dtype need not
 *                 match input's: each weight is converted exactly to f32 (every f16 and bf16
 *                 value is an f32), then weight_offset is added in f32; the result depends only
 *                 on the weight values (the same values as bf16 or as f32 give identical bytes).
 * @param output   [..., H]  (PACKED_ROW_END: [..., H + 4]) f8e4m3fn, f8e4m3fnuz, f8e4m3, f8e5m2,
 *                 f8e5m2fnuz or int8; out
 * @param scales   STATIC: [1] f32 dequant scale; in.
 *                 DYNAMIC_ROW: [..., 1]; DYNAMIC_GROUP: [..., H/G]; f32, f16, bf16 or e8m0
 *                 (rounded up, enc_e8m0_up); out; any strides, e.g. column-major [H/G, rows]
 *                 with a leading stride is shape [rows, H/G] with strides {1, ld}. NULL with
 *                 PACKED_ROW_END.
 * @param options  NULL (the defaults) or fusednorm_rmsnorm_quant_options; in
 * @param stream   the caller's stream (see the conventions); ignored on the CPU
 *
 * Every scale is a dequantization scale: y ~ dec(q) * s.
 * H (the last dimension of input) must be >= 1; zero rows (a zero leading dimension) is a valid
 * call that writes nothing. No two of input, residual, weight, output and scales (the static
 * scale included) may overlap; residual is the one tensor read and written in place (see
 * "aliasing" in the conventions; output, residual and dynamic scales must not overlap
 * themselves).
 * Returns INVALID_ARGUMENT or UNSUPPORTED (with the argument named) and writes nothing. */
FUSEDNORM_API fusednorm_status fusednorm_rmsnorm_quant(
    const DLTensor* input, DLTensor* residual, const DLTensor* weight, DLTensor* output,
    DLTensor* scales, const fusednorm_rmsnorm_quant_options* options, void* stream);
/** @} */

/* ---------------------------------------------------------------- rmsnorm_fp4 */
/** @defgroup rmsnorm_fp4 rmsnorm_fp4, dequantize_fp4
 * RMSNorm (or quant only) followed by FP4 block quantization (NVFP4, MXFP4), scales row-major or
 * swizzled; and the dequantization back to f32, f16 or bf16.
 * @{ */

/** The FP4 block format: block size, scale type, global scale. */
typedef enum fusednorm_fp4_format {
  FUSEDNORM_FP4_NVFP4 = 0, /**< blocks of 16, f8e4m3fn scales, optional f32 global scale */
  FUSEDNORM_FP4_MXFP4 = 1  /**< blocks of 32, e8m0 scales (enc_e8m0_up), no global scale */
} fusednorm_fp4_format;

/** How the FP4 block scales are laid out in `scales`. */
typedef enum fusednorm_fp4_scale_layout {
  FUSEDNORM_FP4_SCALES_ROW_MAJOR = 0, /**< scales [..., H/block], last dimension contiguous */
  FUSEDNORM_FP4_SCALES_SWIZZLED = 1   /**< the 128x4 tiled layout of block-scaled GEMMs: a compact
                                         tensor of fusednorm_fp4_swizzled_size() bytes */
} fusednorm_fp4_scale_layout;

/** Options of fusednorm_rmsnorm_fp4(); fusednorm_rmsnorm_fp4_options_init() sets the defaults. */
typedef struct fusednorm_rmsnorm_fp4_options {
  size_t struct_size;   /**< sizeof(fusednorm_rmsnorm_fp4_options), set by the init function */
  int32_t norm;         /**< fusednorm_norm; default RMS */
  int32_t format;       /**< fusednorm_fp4_format; default NVFP4 */
  int32_t scale_layout; /**< fusednorm_fp4_scale_layout; default ROW_MAJOR */
  int32_t reserved0;    /**< must be 0 */
  float eps;            /**< >= 0; default 1e-6 */
  float weight_offset;  /**< added to each weight (1 for Gemma); default 0 */
} fusednorm_rmsnorm_fp4_options;

/** Sets the defaults (also what options = NULL means): struct_size, norm = RMS, format = NVFP4,
 * scale_layout = ROW_MAJOR, eps = 1e-6, weight_offset = 0. */
FUSEDNORM_API void fusednorm_rmsnorm_fp4_options_init(fusednorm_rmsnorm_fp4_options* options);

/** Size in bytes (= elements) of the swizzled scale tensor for `rows` rows of `h` elements in
 * `format`: ceil(rows/128)*128 * ceil((h/block)/4)*4. Returns INVALID_ARGUMENT for a negative
 * size, an unknown format, h not a multiple of the block, or a size past INT64_MAX; *bytes may
 * not be NULL. */
FUSEDNORM_API fusednorm_status fusednorm_fp4_swizzled_size(int64_t rows, int64_t h, int32_t format,
                                                           int64_t* bytes);

/** RMSNorm (or quant only) followed by FP4 block quantization, NVFP4 or MXFP4
 * (docs/numerics.md, "rmsnorm_fp4").
 * @param input        [..., H]  f32, f16 or bf16; H a multiple of the block (16 NVFP4, 32
 *                     MXFP4); in
 * @param residual     [..., H]  NULL, or as input; in/out (x = input + residual, rounded to the
 *                     input dtype, written back here, then normalized), as in rmsnorm_quant
 * @param weight       [H]  f32, f16 or bf16; NULL only with norm = NONE
 * @param output       [..., H]  f4e2m1 (kDLFloat4_e2m1fn, two a byte, element 2k in the low
 *                     nibble), or its uint8 view [..., H/2]; rows start on a byte; out
 * @param scales       ROW_MAJOR: [..., H/block]; SWIZZLED: any compact tensor of exactly
 *                     fusednorm_fp4_swizzled_size(rows, H, format) bytes, every byte written
 *                     (padding rows and blocks as 0); dtype f8e4m3fn (NVFP4) or e8m0 (MXFP4), or
 *                     uint8; out
 * @param global_scale NVFP4: NULL (gs = 1) or an f32 tensor of one element on the call's device,
 *                     read by the kernel (no host synchronization; graph-safe); MXFP4: must be NULL
 * @param options      NULL (the defaults) or fusednorm_rmsnorm_fp4_options; in
 * @param stream       the caller's stream (see the conventions); ignored on the CPU
 *
 * Dequantization: y ~ dec(q) * dec(scale) / gs (fusednorm_dequantize_fp4).
 * A block holding a NaN or Inf y gets the NaN scale (0x7F, 0xFF) and codes of y * 0.
 * No two tensors may overlap (the residual is read and written in place). Returns
 * INVALID_ARGUMENT or UNSUPPORTED (with the argument named) and writes nothing. */
FUSEDNORM_API fusednorm_status fusednorm_rmsnorm_fp4(const DLTensor* input, DLTensor* residual,
                                                     const DLTensor* weight, DLTensor* output,
                                                     DLTensor* scales, const DLTensor* global_scale,
                                                     const fusednorm_rmsnorm_fp4_options* options,
                                                     void* stream);

/** Options of fusednorm_dequantize_fp4(); fusednorm_dequantize_fp4_options_init() sets the
 * defaults. */
typedef struct fusednorm_dequantize_fp4_options {
  size_t struct_size;   /**< sizeof(fusednorm_dequantize_fp4_options), set by the init function */
  int32_t format;       /**< fusednorm_fp4_format; default NVFP4 */
  int32_t scale_layout; /**< fusednorm_fp4_scale_layout; default ROW_MAJOR */
} fusednorm_dequantize_fp4_options;

/** Sets the defaults (also what options = NULL means): struct_size, NVFP4, ROW_MAJOR. */
FUSEDNORM_API void fusednorm_dequantize_fp4_options_init(fusednorm_dequantize_fp4_options* options);

/** The inverse of rmsnorm_fp4's encoding: out_i = rn_out( (dec(q_i) * dec(scale)) / gs ), two
 * f32 roundings then one to the output dtype (gs = 1 for MXFP4 or a NULL global_scale).
 * @param codes        [..., H] f4e2m1 or uint8 [..., H/2]; in
 * @param scales       as rmsnorm_fp4 wrote them; in
 * @param global_scale as given to rmsnorm_fp4; in
 * @param output       [..., H] f32, f16 or bf16; out
 * @param options      NULL (the defaults) or fusednorm_dequantize_fp4_options; in
 * @param stream       the caller's stream (see the conventions); ignored on the CPU
 *
 * Same validation rules as rmsnorm_fp4. */
FUSEDNORM_API fusednorm_status fusednorm_dequantize_fp4(const DLTensor* codes, const DLTensor* scales,
                                                        const DLTensor* global_scale, DLTensor* output,
                                                        const fusednorm_dequantize_fp4_options* options,
                                                        void* stream);
/** @} */

/* ---------------------------------------------------------------- qk_rmsnorm */
/** @defgroup qk_rmsnorm qk_rmsnorm, qk_rmsnorm_stats, qk_rmsnorm_apply
 * QK-norm for attention (docs/numerics.md §5): RMSNorm of q and of k, each over all its heads
 * (MiniMax-M2, OLMo-2) or over each head of head_dim elements (Qwen3, Gemma-3).
 *
 * Tensor parallelism: each rank holds a slice of the heads of q [..., Nq_local] and k
 * [..., Nk_local] (strided views of a fused QKV projection are fine). Per layer:
 *   1. fusednorm_qk_rmsnorm_stats(q, k, stats): stats [..., 2] f32 = the local SUMS of squares
 *      (stat 0: q, stat 1: k), each in the canonical order over the local slice;
 *   2. all-reduce (sum) stats across the ranks, on the same stream (ncclAllReduce, ncclFloat,
 *      ncclSum; RCCL or MPI_Allreduce alike);
 *   3. fusednorm_qk_rmsnorm_apply(q, k, stats, ...) with options->stats_kind = SUMS and the
 *      global widths Nq = sum of the ranks' Nq_local (and Nk): var = stat / N_global.
 *
 * Sums (not means) make the result the true global RMS for any split of the heads, even or not;
 * averaging per-rank means is wrong when ranks hold different numbers of heads. Everything is
 * enqueued on the caller's stream without allocation or synchronization: graph-capturable.
 * On one device, fusednorm_qk_rmsnorm does both steps in one call and equals stats + apply.
 * @{ */

/** What the statistics given to fusednorm_qk_rmsnorm_apply() hold. */
typedef enum fusednorm_qk_stats_kind {
  FUSEDNORM_QK_STATS_SUMS = 0,        /**< stats hold sums of squares; divided by the global
                                         widths */
  FUSEDNORM_QK_STATS_MEAN_SQUARES = 1 /**< stats hold mean squares (Modular-style); used as they
                                         are */
} fusednorm_qk_stats_kind;

/** Options of the qk_rmsnorm calls; fusednorm_qk_rmsnorm_options_init() sets the defaults. */
typedef struct fusednorm_qk_rmsnorm_options {
  size_t struct_size;      /**< sizeof(fusednorm_qk_rmsnorm_options), set by the init function */
  int32_t stats_kind;      /**< apply: fusednorm_qk_stats_kind; default SUMS */
  int32_t reserved0;       /**< must be 0 */
  int64_t q_global_width;  /**< apply with SUMS: Nq over all ranks, >= q's last dimension; no
                              default (0 is rejected) */
  int64_t k_global_width;  /**< apply with SUMS: Nk over all ranks, >= k's last dimension */
  int64_t head_dim;        /**< fusednorm_qk_rmsnorm: 0 = one RMS over each whole row of q and of k
                              (default); D > 0 = one RMS per head of D elements (D divides both
                              widths; the weights are then [D], shared by all heads) */
  float eps;               /**< >= 0, finite; default 1e-6 */
  float weight_offset;     /**< added to each weight (1 for Gemma's (1 + w)); default 0 */
} fusednorm_qk_rmsnorm_options;

/** Sets the defaults (also what options = NULL means): struct_size, stats_kind = SUMS,
 * q_global_width = k_global_width = 0 (apply with SUMS must set them), head_dim = 0, eps = 1e-6,
 * weight_offset = 0. */
FUSEDNORM_API void fusednorm_qk_rmsnorm_options_init(fusednorm_qk_rmsnorm_options* options);

/** Local statistics of a tensor-parallel QK-norm (docs/numerics.md §5).
 * @param q       [..., Nq]  f32, f16 or bf16; in (a strided view is fine; last dimension
 *                contiguous)
 * @param k       [..., Nk]  same dtype and leading dimensions as q; in
 * @param stats   [..., 2]  f32, q's leading dimensions; out: stats[m, 0] = sum of q[m, i]^2 and
 *                stats[m, 1] = sum of k[m, i]^2, each in the canonical order over the local row
 *                (NaN written as the positive canonical NaN)
 * @param options NULL (the defaults) or fusednorm_qk_rmsnorm_options; in
 * @param stream  the caller's stream (see the conventions); ignored on the CPU
 *
 * Nq, Nk >= 1; Nq != Nk allowed. options may be NULL (of its fields only struct_size and
 * reserved0 are checked). Zero rows is a valid call that writes nothing. q and k may share memory
 * (views of one QKV buffer); stats may overlap neither. Returns INVALID_ARGUMENT or UNSUPPORTED
 * (with the argument named) and writes nothing. */
FUSEDNORM_API fusednorm_status fusednorm_qk_rmsnorm_stats(const DLTensor* q, const DLTensor* k, DLTensor* stats,
                                                          const fusednorm_qk_rmsnorm_options* options,
                                                          void* stream);

/** Applies a QK-norm from (all-reduced) statistics:
 *
 *       inv = 1 / sqrt(var + eps), var = stats[m, j] / N_global (SUMS) or stats[m, j] (MEAN_SQUARES)
 *       out = rn_out((f32(x) * inv) * (f32(w) + weight_offset))      (exactly this grouping)
 *
 * @param q            as for fusednorm_qk_rmsnorm_stats; in
 * @param k            as for fusednorm_qk_rmsnorm_stats; in
 * @param stats        [..., 2] f32, q's leading dimensions; in
 * @param q_weight     [Nq] (this rank's slice of the weights), f32, f16 or bf16; in
 * @param k_weight     [Nk], f32, f16 or bf16; in
 * @param q_out        q's shape; out. Its dtype is q's (then q_out may be q itself, in place: the
 *                     same data, byte_offset, shape and strides; no other overlap), or, for FP8
 *                     attention, f8e4m3fn or f8e4m3fnuz: codes = enc(y * (1 / s)), y the f32 result
 *                     above (no rounding to the input dtype first), s the static dequantization
 *                     scale (y ~ dec(code) * s)
 * @param k_out        k's shape; out; q_out's dtype (both outputs the same); may be k itself (in
 *                     place) as q_out may be q
 * @param out_scales   NULL, or with FP8 outputs [2] f32 on the device: q's s, then k's; in (read
 *                     when the call runs: graph-capturable)
 * @param options      fusednorm_qk_rmsnorm_options (NULL: the defaults, which a SUMS apply
 *                     rejects: it needs the global widths); in
 * @param stream       the caller's stream (see the conventions); ignored on the CPU
 *
 * The inputs (q, k, stats, weights, out_scales) may share memory with each other (q and k as
 * views of one QKV buffer); an output shares none, except with its own input in place.
 * A row whose var + eps is not finite (an Inf or NaN in the stats, or in the mean squares given)
 * gets NaN outputs, never zeros. Returns INVALID_ARGUMENT or UNSUPPORTED and writes nothing. */
FUSEDNORM_API fusednorm_status fusednorm_qk_rmsnorm_apply(const DLTensor* q, const DLTensor* k, const DLTensor* stats,
                                                          const DLTensor* q_weight, const DLTensor* k_weight,
                                                          DLTensor* q_out, DLTensor* k_out,
                                                          const DLTensor* out_scales,
                                                          const fusednorm_qk_rmsnorm_options* options,
                                                          void* stream);

/** The single-device QK-norm, statistics and apply in one call: with options->head_dim = 0 each
 * row of q (and of k) is one RMS group and the result equals fusednorm_qk_rmsnorm_stats then
 * fusednorm_qk_rmsnorm_apply (SUMS, global widths = Nq, Nk) byte for byte; with head_dim = D each
 * head of D elements is its own group (sum of squares in the canonical order over D, var = ss / D)
 * and q_weight, k_weight are [D]. Tensors as for fusednorm_qk_rmsnorm_apply, without stats
 * (weights [Nq], [Nk] when head_dim = 0; FP8 outputs with out_scales likewise). Returns
 * INVALID_ARGUMENT or UNSUPPORTED and writes nothing. */
FUSEDNORM_API fusednorm_status fusednorm_qk_rmsnorm(const DLTensor* q, const DLTensor* k, const DLTensor* q_weight,
                                                    const DLTensor* k_weight, DLTensor* q_out, DLTensor* k_out,
                                                    const DLTensor* out_scales,
                                                    const fusednorm_qk_rmsnorm_options* options, void* stream);
/** @} */

/* ---------------------------------------------------------------- mla_rope_rmsnorm_quant */
/** @defgroup mla mla_rope_rmsnorm_quant
 * The DeepSeek-style MLA KV-cache write in one pass: RoPE on q's rope part, RMSNorm and RoPE of
 * the latent KV row, encoded into a paged cache.
 * @{ */

/** How the R rope elements pair up for the rotation. */
typedef enum fusednorm_rope_style {
  FUSEDNORM_ROPE_INTERLEAVED = 0, /**< pairs (x[2j], x[2j+1]), j < R/2 (DeepSeek's default) */
  FUSEDNORM_ROPE_NEOX = 1         /**< half-split pairs (x[j], x[j + R/2]) */
} fusednorm_rope_style;

/** Options of fusednorm_mla_rope_rmsnorm_quant(); fusednorm_mla_rope_rmsnorm_quant_options_init()
 * sets the defaults. */
typedef struct fusednorm_mla_rope_rmsnorm_quant_options {
  size_t struct_size;  /**< sizeof(fusednorm_mla_rope_rmsnorm_quant_options), set by the init
                          function */
  int32_t rope_style;  /**< fusednorm_rope_style; default INTERLEAVED */
  int32_t reserved0;   /**< must be 0 */
  float eps;           /**< >= 0; default 1e-6 */
  float weight_offset; /**< added to each weight of the latent norm; default 0 */
} fusednorm_mla_rope_rmsnorm_quant_options;

/** Sets the defaults (also what options = NULL means): struct_size, rope_style = INTERLEAVED,
 * eps = 1e-6, weight_offset = 0. */
FUSEDNORM_API void fusednorm_mla_rope_rmsnorm_quant_options_init(fusednorm_mla_rope_rmsnorm_quant_options* options);

/** The DeepSeek-style MLA KV-cache write, in one pass (docs/numerics.md §5): for each token t of a
 * ragged batch of B sequences (sequence b owns tokens row_offsets[b] <= t < row_offsets[b+1]) at
 * position pos(t), the q rope part is rotated, and the latent KV row is RMS-normalized (its first L
 * elements) and rotated (its last R), encoded to the cache dtype and written into a paged cache at
 * page page_table[b, pos / page_size], slot pos % page_size.
 * @param q           [T, Hq, R] f32, f16 or bf16; any strides but the last (a view into the q
 *                    projection); in, and out when q_out is NULL (rotated in place)
 * @param q_out       [T, Hq, R] same dtype as q, or NULL (in place); out
 * @param kv          [T, L + R] same dtype as q (the latent c_kv then k_pe); any leading stride; in
 * @param weight      [L] f32, f16 or bf16 (gamma of the latent norm); in
 * @param cos_sin     [max_pos, R] f32 or bf16; row p holds cos, sin interleaved: cos_sin[p, 2j] =
 *                    cos and cos_sin[p, 2j+1] = sin of pair j (for either rope_style); in
 * @param positions   [T] int32 or int64, or NULL; pos(t) = positions[t]; in
 * @param row_offsets [B + 1] int32 or int64: row_offsets[0] = 0, non-decreasing, row_offsets[B] =
 *                    T; in
 * @param cache_len   [B] int32 or int64, or NULL: with positions NULL, pos(t) = cache_len[b] + t -
 *                    row_offsets[b] (the tokens already cached); exactly one of positions and
 *                    cache_len is given; in
 * @param page_table  [B, max_pages] int32 or int64 (any leading stride): page ids; in
 * @param kv_cache    [num_pages, page_size, L + R] bf16, f16, f32 or an FP8 format (f8e4m3fn,
 *                    f8e4m3fnuz, f8e4m3, f8e5m2, f8e5m2fnuz); any strides but the last (one layer
 *                    of a larger allocation); out: only the T slots the call addresses are written
 * @param k_scale     [1] f32 (the cache's dequantization scale), or NULL (1): the cache holds
 *                    enc(v / k_scale), one rounding from f32 (FP8 saturates at the format's
 *                    largest finite); in
 * @param invalid_tokens [1] int32, or NULL: see "index values" below; out (GPU only)
 * @param options     NULL (the defaults) or fusednorm_mla_rope_rmsnorm_quant_options; in
 * @param stream      the caller's stream (see the conventions); ignored on the CPU
 *
 * L (the kv_lora_rank) and R (the rope head dim) are multiples of 8 and at least 8; page_size >= 1.
 * The index tensors and invalid_tokens must be aligned to their element size (INVALID_ARGUMENT
 * otherwise). GPU: UNSUPPORTED when L + R > 2^30 or T * (1 + ceil(Hq * R / 2048)) >= 2^31.
 * Tokens, heads and sequences may be zero (a call that writes nothing).
 * Aliasing: no two tensors overlap (q with q_out NULL is the one tensor read and written in place);
 * the call writes whole rows of L + R codes into the cache and nothing else of it.
 * Index values (positions, row_offsets, cache_len, page_table) and their checks:
 * - CPU tensors: validation reads them and rejects (INVALID_ARGUMENT, naming the tensor, index and
 *   value; nothing written) row_offsets[0] != 0, a decrease, row_offsets[B] != T, a negative
 *   cache_len, a position outside [0, max_pos) of the cos/sin table, a page index (pos /
 *   page_size) at or past max_pages, a page id outside [0, num_pages), and two tokens addressing
 *   one cache slot.
 * - GPU tensors: the host cannot read device memory without a synchronization (the call is
 *   asynchronous and graph-capturable), so the values are checked on the device, per token: a
 *   token whose sequence (row_offsets[b] <= t < row_offsets[b+1]), position or page is invalid in
 *   the sense above is skipped whole (neither its q nor its cache slot is written: the kernel never
 *   writes outside q_out/q and the cache whatever the indices hold) and, when invalid_tokens is
 *   given, counted there (atomic add; the caller zeroes it). Two valid tokens addressing one slot
 *   are not detected on the device (the slot gets one of the rows, or a mix).
 * Returns INVALID_ARGUMENT or UNSUPPORTED (with the argument named) and writes nothing. */
FUSEDNORM_API fusednorm_status fusednorm_mla_rope_rmsnorm_quant(
    DLTensor* q, DLTensor* q_out, const DLTensor* kv, const DLTensor* weight, const DLTensor* cos_sin,
    const DLTensor* positions, const DLTensor* row_offsets, const DLTensor* cache_len,
    const DLTensor* page_table, DLTensor* kv_cache, const DLTensor* k_scale, DLTensor* invalid_tokens,
    const fusednorm_mla_rope_rmsnorm_quant_options* options, void* stream);
/** @} */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FUSEDNORM_FUSEDNORM_H_ */
