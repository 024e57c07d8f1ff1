/* The C ABI's features beyond the training loop, the ones a Python worker has:
 * named checkpoint tensors, the validation callback, the resynced flag, the
 * outer state saved and loaded, model buffers and the optimizer's state
 * (lh_session_start_model). Its steps are made-up SGD-with-momentum steps; its
 * last 4 floats are a buffer (a running mean of a region-specific value, so the
 * regions' buffers differ until the round's end averages them: without that no
 * round would commit). It prints what it saw, for the test to check:
 *   "resynced_at_start R"
 *   "eval L"                          each time the library asks for the validation loss
 *   "saved round 1: outer floats K nonzero Z hash H"
 *   "loaded round 1 state: hash H"    after round 2 committed, every region loads round 1's state
 *   "round R buffer B expected E"     after every commit: the buffer's first value, and the
 *                                     mean over the regions of what each trained it to (a
 *                                     plain mean: an outer step on it would overshoot)
 * Usage: c_features_worker NUM_PARAMS (at least 8) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longhaul/session/c_api.h"

struct Model {
  float* params;
  long n;
};

/* The validation loss: the mean square of the parameters (what the library
 * reports for the round), printed in full precision. */
static int Eval(void* user, double* loss) {
  const struct Model* m = (const struct Model*)user;
  double sum = 0;
  for (long i = 0; i < m->n; ++i) sum += (double)m->params[i] * m->params[i];
  *loss = sum / (double)m->n;
  printf("eval %.17g\n", *loss);
  fflush(stdout);
  return LH_OK;
}

static int Check(int code, const char* what) {
  if (code != LH_OK) fprintf(stderr, "c_features_worker: %s: %s\n", what, lh_last_error());
  return code == LH_OK;
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000;
  if (n < 8) return 2;
  lh_session* s = NULL;
  if (!Check(lh_session_open(&s), "open")) return 2;
  struct Model m = {malloc(sizeof(float) * (size_t)n), n};
  for (long i = 0; i < n; ++i) m.params[i] = (float)((i * 37) % 101 - 50) / 64.0f;
  /* Two named tensors: a weight vector and a 2x2 block. */
  const int64_t w_shape[1] = {n - 4};
  const int64_t b_shape[2] = {2, 2};
  if (!Check(lh_session_add_tensor(s, "w", w_shape, 1, 0, (uint64_t)(n - 4)), "add_tensor w")) return 2;
  if (!Check(lh_session_add_tensor(s, "b", b_shape, 2, (uint64_t)(n - 4), 4), "add_tensor b")) return 2;
  if (!Check(lh_session_set_eval(s, Eval, &m), "set_eval")) return 2;
  float* velocity = calloc((size_t)n, sizeof(float)); /* the optimizer's state: rolled back with the round */
  float* state[1] = {velocity};
  if (!Check(lh_session_start_model(s, m.params, (uint64_t)n, 4, state, 1), "start_model")) return 2;
  const char* cfg = lh_session_job_config_json(s);
  const long region = strtol(strstr(cfg, "\"region_index\":") + 15, NULL, 10);
  const long regions = strtol(strstr(cfg, "\"region_count\":") + 15, NULL, 10);
  const long h = strtol(strstr(cfg, "\"inner_steps\":") + 14, NULL, 10);
  double start_value = m.params[n - 4];  /* the buffer at the round's start */
  printf("resynced_at_start %d\n", lh_session_resynced_at_start(s));

  float* grad = malloc(sizeof(float) * (size_t)n);
  float* saved_theta = malloc(sizeof(float) * (size_t)n);
  float* saved_outer = NULL;
  uint64_t outer_size = 0;
  char hash[128];
  while (!lh_session_finished(s)) {
    const long g = (long)lh_session_job_step(s) + 1;
    for (long i = 0; i < n - 4; ++i) grad[i] = (float)((i * 7 + g * 3) % 17 - 8) / 4096.0f;
    for (long i = 0; i < n - 4; ++i) {
      velocity[i] = 0.5f * velocity[i] + grad[i];
      m.params[i] -= velocity[i];
    }
    for (long i = n - 4; i < n; ++i) m.params[i] = 0.9f * m.params[i] + 0.1f * (float)(region + 1);
    int event = 0;
    if (!Check(lh_session_step(s, 1.0f, 1, &event), "step")) return 1;
    if (event != LH_EVENT_COMMITTED) continue;
    /* Region r trains the buffer from start_value to d^h * start + (1 - d^h) * (r + 1). */
    double decay = 1;
    for (long k = 0; k < h; ++k) decay *= 0.9;
    const double expected = decay * start_value + (1 - decay) * (double)(regions + 1) / 2.0;
    printf("round %u buffer %.9g expected %.9g\n", lh_session_committed_round(s), (double)m.params[n - 4], expected);
    start_value = m.params[n - 4];
    if (lh_session_committed_round(s) == 1) {
      outer_size = lh_session_outer_state_size(s);
      saved_outer = malloc(sizeof(float) * (outer_size > 0 ? outer_size : 1));
      if (!Check(lh_session_outer_state(s, saved_outer, outer_size), "outer_state")) return 1;
      memcpy(saved_theta, lh_session_theta(s), sizeof(float) * (size_t)n);
      long nonzero = 0;
      for (uint64_t i = 0; i < outer_size; ++i) nonzero += saved_outer[i] != 0.0f;
      lh_session_theta_hash(s, hash, sizeof(hash));
      printf("saved round 1: outer floats %llu nonzero %ld hash %s\n", (unsigned long long)outer_size, nonzero, hash);
    } else if (lh_session_committed_round(s) == 2) {
      if (!Check(lh_session_load_state(s, saved_theta, (uint64_t)n, saved_outer, outer_size), "load_state")) return 1;
      lh_session_theta_hash(s, hash, sizeof(hash));
      printf("loaded round 1 state: hash %s\n", hash);
      start_value = m.params[n - 4];
    }
    fflush(stdout);
  }
  lh_session_close(s);
  free(grad);
  free(saved_theta);
  free(saved_outer);
  free(m.params);
  free(velocity);
  return 0;
}
