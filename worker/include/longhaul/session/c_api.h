/* longhaul worker library, C ABI: any language's training loop as a worker.
 *
 * A thin surface over longhaul::session::Session (session.h): opaque handles,
 * integer status codes, and an error string per thread. The program is started
 * by a longhaul agent, which sets the LONGHAUL_* environment it reads.
 *
 *   lh_session* s;
 *   if (lh_session_open(&s) != LH_OK) { fprintf(stderr, "%s\n", lh_last_error()); return 2; }
 *   const char* cfg = lh_session_job_config_json(s);   // H, codec, lr, seed, data, ...
 *   float* params = ...;  uint64_t n = ...;             // the caller's flat fp32 parameters
 *   lh_session_start(s, params, n);                     // hello, checkpoint restore, round 1
 *   while (!lh_session_finished(s)) {
 *     ... one inner step on params ...
 *     int event; lh_session_step(s, loss, tokens, &event);   // LH_EVENT_*
 *   }
 *   lh_session_close(s);
 *
 * `params` stays owned by the caller and must outlive the session; the session
 * writes theta(t) into it on commit and theta(t-1) on rollback. Not thread-safe:
 * one thread drives one session. */
#ifndef LONGHAUL_SESSION_C_API_H_
#define LONGHAUL_SESSION_C_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LH_API __attribute__((visibility("default")))
#else
#define LH_API
#endif

/* Status codes: the values of longhaul::StatusCode. */
enum {
  LH_OK = 0,
  LH_INVALID_ARGUMENT = 1,
  LH_NOT_FOUND = 2,
  LH_ALREADY_EXISTS = 3,
  LH_FAILED_PRECONDITION = 4,
  LH_DEADLINE_EXCEEDED = 5,
  LH_UNAVAILABLE = 6,
  LH_DATA_LOSS = 7,
  LH_PERMISSION_DENIED = 8,
  LH_ABORTED = 9,
  LH_CANCELLED = 10,
  LH_RESOURCE_EXHAUSTED = 11,
  LH_VERSION_MISMATCH = 12,
  LH_INTERNAL = 13,
};

/* Events returned by lh_session_step. */
enum {
  LH_EVENT_NONE = 0,         /* an inner step like any other */
  LH_EVENT_COMMITTED = 1,    /* the round committed: params hold theta(t) */
  LH_EVENT_ROLLED_BACK = 2,  /* the round aborted: params hold theta(t-1); it is retried */
  LH_EVENT_RESYNCED = 3,     /* this region was re-synchronised from a live one */
  LH_EVENT_FINISHED = 4,     /* the job is over (after its last commit params hold the final
                                theta); code after the loop runs within worker.exit_grace_s */
};

typedef struct lh_session lh_session;

/* The last error on this thread ("" after a success). Valid until the next call. */
LH_API const char* lh_last_error(void);

/* Opens the session from the environment the agent set. */
LH_API int lh_session_open(lh_session** out);
/* The job as JSON (nested objects: sync, inner, outer, compression, data,
 * worker), owned by the session. */
LH_API const char* lh_session_job_config_json(const lh_session* s);
/* Before start: names a tensor of the flat vector for checkpoints (safetensors):
 * ndim dimensions in shape, numel floats from offset. Tensors must tile the
 * vector in order; without any, the checkpoint holds one tensor "flat". */
LH_API int lh_session_add_tensor(lh_session* s, const char* name, const int64_t* shape, uint32_t ndim,
                                 uint64_t offset, uint64_t numel);
/* Before start: the validation loss, reported to `longhaul status` and the
 * metrics. Called on the region's first worker right after each outer step,
 * with params holding the new parameters; returns LH_OK and sets *loss, or an
 * LH_* code, which fails the round. */
typedef int (*lh_eval_fn)(void* user_data, double* loss);
LH_API int lh_session_set_eval(lh_session* s, lh_eval_fn fn, void* user_data);
LH_API int lh_session_start(lh_session* s, float* params, uint64_t num_params);
/* As lh_session_start, with the rest of the model's state:
 * - buffers (state the optimizer does not train, e.g. BatchNorm running
 *   statistics): the last num_buffers of the num_params floats. They take no
 *   outer step; at every round's end they are averaged over every worker of
 *   every region (fp32), so the replicas, and their hash, stay identical.
 * - the inner optimizer's state: optimizer_state[0..num_optimizer_state) each
 *   point to num_params floats the caller's optimizer updates in place (e.g.
 *   AdamW's two moments, the first moment first). They are restored with the
 *   parameters when a round rolls back, sent to a region that joins a sync
 *   job, and averaged across regions when the job's
 *   inner.{first,second}_moment_sync_rounds say so. A step counter stays the
 *   caller's: set it from lh_session_job_step after every event.
 * NULL optimizer_state with 0 entries: none. */
LH_API int lh_session_start_model(lh_session* s, float* params, uint64_t num_params, uint64_t num_buffers,
                                  float* const* optimizer_state, uint64_t num_optimizer_state);
/* Between backward and the optimizer step of every inner step: with sync kind
 * "sync", replaces grad (this region's mean gradient, num_params floats) with
 * the mean over the round's regions; a no-op for every other kind. A failure
 * fails the round: the next lh_session_step rolls it back. */
LH_API int lh_session_sync_gradients(lh_session* s, float* grad, uint64_t num_params);
LH_API int lh_session_step(lh_session* s, float loss, uint64_t tokens, int* event);
/* The caller's inner step failed: the round is reported failed and rolled back. */
LH_API int lh_session_fail_round(lh_session* s, const char* why, int* event);
LH_API int lh_session_finished(const lh_session* s);
LH_API uint32_t lh_session_round(const lh_session* s);
LH_API uint32_t lh_session_committed_round(const lh_session* s);
LH_API uint64_t lh_session_job_step(const lh_session* s);
/* 1 when this worker joined a running job and received its state from a live
 * region at start (a relaunched worker): reset schedules from lh_session_job_step. */
LH_API int lh_session_resynced_at_start(const lh_session* s);
/* The global parameters theta (num_params floats; valid after start). */
LH_API const float* lh_session_theta(const lh_session* s);
/* This worker's outer-optimizer state (its shard's momentum): its size in floats,
 * and a copy into out (size floats). With theta, what a user checkpoint saves. */
LH_API uint64_t lh_session_outer_state_size(const lh_session* s);
LH_API int lh_session_outer_state(const lh_session* s, float* out, uint64_t size);
/* Loads theta (num_params floats, into params too) and this worker's outer state
 * before a round's first inner step. Every region must load the same state, or
 * the next commit's hashes disagree. */
LH_API int lh_session_load_state(lh_session* s, const float* theta, uint64_t num_params, const float* outer,
                                 uint64_t outer_size);
/* Copies ParameterHash(theta) (what the round reports) into buf, NUL-terminated. */
LH_API int lh_session_theta_hash(const lh_session* s, char* buf, uint64_t size);
LH_API void lh_session_close(lh_session* s);

#ifdef __cplusplus
}
#endif

#endif /* LONGHAUL_SESSION_C_API_H_ */
