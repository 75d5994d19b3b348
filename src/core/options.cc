// The options structs' defaults (fusednorm.h), in core: validation applies them to a NULL options
// pointer, so the library and the scalar reference share them.
#include <math.h>
#include <string.h>

#include "fusednorm/fusednorm.h"

extern "C" {

void fusednorm_cast_options_init(fusednorm_cast_options* options) {
  if (options == nullptr) return;
  memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->e8m0_rounding = FUSEDNORM_E8M0_NEAREST;
}

void fusednorm_rmsnorm_quant_options_init(fusednorm_rmsnorm_quant_options* options) {
  if (options == nullptr) return;
  memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->norm = FUSEDNORM_NORM_RMS;
  options->scale_mode = FUSEDNORM_SCALE_DYNAMIC_ROW;
  options->scale_placement = FUSEDNORM_SCALES_TENSOR;
  options->group_size = 128;
  options->eps = 1e-6f;
  options->weight_offset = 0.0f;
  options->scale_ub = INFINITY;
  options->min_scale = 0.0f;
  options->qmax = 0.0f;
}

void fusednorm_rmsnorm_fp4_options_init(fusednorm_rmsnorm_fp4_options* options) {
  if (options == nullptr) return;
  memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->norm = FUSEDNORM_NORM_RMS;
  options->format = FUSEDNORM_FP4_NVFP4;
  options->scale_layout = FUSEDNORM_FP4_SCALES_ROW_MAJOR;
  options->eps = 1e-6f;
  options->weight_offset = 0.0f;
}

void fusednorm_dequantize_fp4_options_init(fusednorm_dequantize_fp4_options* options) {
  if (options == nullptr) return;
  memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->format = FUSEDNORM_FP4_NVFP4;
  options->scale_layout = FUSEDNORM_FP4_SCALES_ROW_MAJOR;
}

// qk_rmsnorm
void fusednorm_qk_rmsnorm_options_init(fusednorm_qk_rmsnorm_options* options) {
  if (options == nullptr) return;
  memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->stats_kind = FUSEDNORM_QK_STATS_SUMS;
  options->q_global_width = 0;
  options->k_global_width = 0;
  options->head_dim = 0;
  options->eps = 1e-6f;
  options->weight_offset = 0.0f;
}

}  // extern "C"

// ---------------------------------------------------------------- mla_rope_rmsnorm_quant
extern "C" void fusednorm_mla_rope_rmsnorm_quant_options_init(fusednorm_mla_rope_rmsnorm_quant_options* options) {
  if (options == nullptr) return;
  memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->rope_style = FUSEDNORM_ROPE_INTERLEAVED;
  options->eps = 1e-6f;
  options->weight_offset = 0.0f;
}
