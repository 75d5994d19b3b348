/* A C99 program built against the installed fusednorm with nothing but
 * `cc main.c $(pkg-config --cflags --libs fusednorm)` (tests/install/run_install_test.cmake):
 * the C ABI from C, a cast with known codes, an RMSNorm + per-row FP8 call checked against its
 * formula, and a bad call's status and message. Prints OK and returns 0 when all hold. */
#include <fusednorm/fusednorm.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

static DLTensor tensor(void* data, uint8_t code, uint8_t bits, int32_t ndim, int64_t* shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

int main(void) {
  int failures = 0, major = -1;
  printf("fusednorm %s (C), CPU target %s\n", fusednorm_version(&major, NULL, NULL), fusednorm_cpu_target());
  if (major != FUSEDNORM_VERSION_MAJOR) failures++;

  /* cast f32 -> f8e4m3fn: 1 = 0x38, 0.5 = 0x30, -448 = 0xFE, 1000 saturates to 0x7E, 2^-9 = 0x01 */
  float src[5] = {1.0f, 0.5f, -448.0f, 1000.0f, 0.001953125f};
  uint8_t dst[5] = {0}, want[5] = {0x38, 0x30, 0xFE, 0x7E, 0x01};
  int64_t n[1] = {5};
  DLTensor s = tensor(src, kDLFloat, 32, 1, n), d = tensor(dst, kDLFloat8_e4m3fn, 8, 1, n);
  if (fusednorm_cast(&s, &d, NULL, NULL) != FUSEDNORM_SUCCESS || memcmp(dst, want, sizeof want) != 0) {
    fprintf(stderr, "cast: %s\n", fusednorm_last_error());
    failures++;
  }

  /* rmsnorm_quant of one row [3, 4] * weight 1: y = x / rms(x) = x / sqrt(12.5) with eps 0;
   * the per-row scale is max|y| / 448. */
  float x[2] = {3.0f, 4.0f}, w[2] = {1.0f, 1.0f}, scale = 0.0f;
  uint8_t q[2] = {0};
  int64_t row[2] = {1, 2}, wshape[1] = {2}, sshape[2] = {1, 1};
  DLTensor in = tensor(x, kDLFloat, 32, 2, row), gamma = tensor(w, kDLFloat, 32, 1, wshape);
  DLTensor out = tensor(q, kDLFloat8_e4m3fn, 8, 2, row), sc = tensor(&scale, kDLFloat, 32, 2, sshape);
  fusednorm_rmsnorm_quant_options o;
  fusednorm_rmsnorm_quant_options_init(&o);
  o.eps = 0.0f;
  if (fusednorm_rmsnorm_quant(&in, NULL, &gamma, &out, &sc, &o, NULL) != FUSEDNORM_SUCCESS) {
    fprintf(stderr, "rmsnorm_quant: %s\n", fusednorm_last_error());
    failures++;
  }
  const double y_max = 4.0 / sqrt(12.5);
  if (fabs(scale - y_max / 448.0) > 1e-6 * y_max || q[1] != 0x7E) {
    fprintf(stderr, "rmsnorm_quant: scale %.9g (want %.9g), q[1] 0x%02X (want 0x7E)\n", scale, y_max / 448.0, q[1]);
    failures++;
  }

  /* A weight of the wrong length: INVALID_ARGUMENT with a message naming it; nothing written. */
  int64_t bad[1] = {3};
  DLTensor bad_w = tensor(w, kDLFloat, 32, 1, bad);
  q[0] = 0xAB;
  if (fusednorm_rmsnorm_quant(&in, NULL, &bad_w, &out, &sc, &o, NULL) != FUSEDNORM_INVALID_ARGUMENT ||
      strstr(fusednorm_last_error(), "weight") == NULL || q[0] != 0xAB) {
    fprintf(stderr, "bad call: %s\n", fusednorm_last_error());
    failures++;
  } else {
    printf("bad call: %s: %s\n", fusednorm_status_string(FUSEDNORM_INVALID_ARGUMENT), fusednorm_last_error());
  }
  if (failures != 0) {
    fprintf(stderr, "FAILED: %d problems\n", failures);
    return 1;
  }
  printf("OK\n");
  return 0;
}
