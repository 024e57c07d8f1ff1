/* A worker written in C against the C ABI (longhaul/session/c_api.h): its
 * "inner steps" are exact SGD steps with lr 1 on a made-up gradient (multiples
 * of 2^-12 on parameters that are multiples of 2^-6; kind sync averages the
 * gradient across regions first), the same ones workers/replay_worker.py makes
 * in PyTorch, so both must commit bitwise-identical hashes.
 * Usage: c_replay_worker NUM_PARAMS [OTHER_START_REGION [OTHER_START_RANK]]
 * The workers of region OTHER_START_REGION (its index), or only its worker
 * OTHER_START_RANK, build other initial parameters, as a script that forgot
 * to seed would. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longhaul/session/c_api.h"

/* "region_index": N in the job's JSON. */
static long JsonInt(const char* json, const char* key) {
  char pattern[64];
  snprintf(pattern, sizeof(pattern), "\"%s\":", key);
  const char* at = strstr(json, pattern);
  return at ? strtol(at + strlen(pattern), NULL, 10) : -1;
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000;
  const long other_region = argc > 2 ? strtol(argv[2], NULL, 10) : -1;
  const long other_rank = argc > 3 ? strtol(argv[3], NULL, 10) : -1;
  lh_session* s = NULL;
  if (lh_session_open(&s) != LH_OK) {
    fprintf(stderr, "c_replay_worker: %s\n", lh_last_error());
    return 2;
  }
  const long region = JsonInt(lh_session_job_config_json(s), "region_index");
  float* params = malloc(sizeof(float) * (size_t)n);
  const long rank = JsonInt(lh_session_job_config_json(s), "rank");
  const long mix = region == other_region && (other_rank < 0 || rank == other_rank) ? 41 : 37;
  for (long i = 0; i < n; ++i) params[i] = (float)((i * mix) % 101 - 50) / 64.0f;
  if (lh_session_start(s, params, (uint64_t)n) != LH_OK) {
    fprintf(stderr, "c_replay_worker: %s\n", lh_last_error());
    return 2;
  }
  if (lh_session_resynced_at_start(s)) fprintf(stderr, "c_replay_worker: resynced at start\n");
  float* grad = malloc(sizeof(float) * (size_t)n);
  while (!lh_session_finished(s)) {
    const long g = (long)lh_session_job_step(s) + 1; /* the job-wide step being taken */
    for (long i = 0; i < n; ++i) grad[i] = (float)((i * 7 + g * 3 + region * 5) % 17 - 8) / 4096.0f;
    /* Kind sync: the mean over the regions; otherwise unchanged. A failure ends the round at the step below. */
    if (lh_session_sync_gradients(s, grad, (uint64_t)n) != LH_OK) fprintf(stderr, "c_replay_worker: %s\n", lh_last_error());
    for (long i = 0; i < n; ++i) params[i] -= grad[i];
    int event = 0;
    if (lh_session_step(s, 1.0f, 1, &event) != LH_OK) {
      fprintf(stderr, "c_replay_worker: %s\n", lh_last_error());
      return 1;
    }
    if (event == LH_EVENT_COMMITTED) {
      char hash[128];
      lh_session_theta_hash(s, hash, sizeof(hash));
      fprintf(stderr, "committed round %u hash %s\n", lh_session_committed_round(s), hash);
    }
  }
  lh_session_close(s);
  free(grad);
  free(params);
  return 0;
}
