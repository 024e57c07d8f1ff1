// The C ABI (c_api.h) over Session. Errors never cross as exceptions: every
// entry point catches, stores the message for lh_last_error and returns a code.
#include "longhaul/session/c_api.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "longhaul/common/checksum.h"
#include "longhaul/session/job_config_json.h"
#include "longhaul/session/session.h"

namespace {

using longhaul::StatusCode;
static_assert(LH_INVALID_ARGUMENT == static_cast<int>(StatusCode::kInvalidArgument));
static_assert(LH_FAILED_PRECONDITION == static_cast<int>(StatusCode::kFailedPrecondition));
static_assert(LH_UNAVAILABLE == static_cast<int>(StatusCode::kUnavailable));
static_assert(LH_PERMISSION_DENIED == static_cast<int>(StatusCode::kPermissionDenied));
static_assert(LH_ABORTED == static_cast<int>(StatusCode::kAborted));
static_assert(LH_INTERNAL == static_cast<int>(StatusCode::kInternal));

thread_local std::string last_error;

int Fail(const longhaul::Status& s) {
  last_error = s.ToString();
  return static_cast<int>(s.code());
}

int Ok() {
  last_error.clear();
  return LH_OK;
}

template <typename F>
int Guard(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Fail(longhaul::Internal(std::string("unexpected exception: ") + e.what()));
  }
}

int EventCode(longhaul::session::StepEvent e) {
  using longhaul::session::StepEvent;
  switch (e) {
    case StepEvent::kNone: return LH_EVENT_NONE;
    case StepEvent::kCommitted: return LH_EVENT_COMMITTED;
    case StepEvent::kRolledBack: return LH_EVENT_ROLLED_BACK;
    case StepEvent::kResynced: return LH_EVENT_RESYNCED;
    case StepEvent::kFinished: return LH_EVENT_FINISHED;
  }
  return LH_EVENT_NONE;
}

}  // namespace

struct lh_session {
  std::unique_ptr<longhaul::session::Session> session;
  std::string config_json;
  std::vector<longhaul::trainer::TensorView> tensors;  // lh_session_add_tensor, for start
  lh_eval_fn eval = nullptr;                           // lh_session_set_eval, for start
  void* eval_user_data = nullptr;
};

extern "C" {

const char* lh_last_error(void) { return last_error.c_str(); }

int lh_session_open(lh_session** out) {
  return Guard([&] {
    if (out == nullptr) return Fail(longhaul::InvalidArgument("lh_session_open: out is NULL"));
    *out = nullptr;
    auto options = longhaul::session::SessionOptionsFromEnvironment();
    if (!options.ok()) return Fail(options.status());
    auto session = longhaul::session::Session::Open(*options);
    if (!session.ok()) return Fail(session.status());
    auto handle = std::make_unique<lh_session>();
    handle->config_json = longhaul::session::JobConfigJson((*session)->config(), *options);
    handle->session = std::move(*session);
    *out = handle.release();
    return Ok();
  });
}

const char* lh_session_job_config_json(const lh_session* s) { return s ? s->config_json.c_str() : ""; }

int lh_session_add_tensor(lh_session* s, const char* name, const int64_t* shape, uint32_t ndim, uint64_t offset,
                          uint64_t numel) {
  return Guard([&] {
    if (s == nullptr || name == nullptr || (shape == nullptr && ndim > 0))
      return Fail(longhaul::InvalidArgument("lh_session_add_tensor: needs a session, a name and the shape"));
    if (s->session->replica() != nullptr)
      return Fail(longhaul::FailedPrecondition("lh_session_add_tensor: the session has started"));
    longhaul::trainer::TensorView t;
    t.name = name;
    t.shape.assign(shape, shape + ndim);
    t.offset = offset;
    t.numel = numel;
    s->tensors.push_back(std::move(t));  // their tiling is checked at start
    return Ok();
  });
}

int lh_session_set_eval(lh_session* s, lh_eval_fn fn, void* user_data) {
  return Guard([&] {
    if (s == nullptr) return Fail(longhaul::InvalidArgument("lh_session_set_eval: session is NULL"));
    if (s->session->replica() != nullptr)
      return Fail(longhaul::FailedPrecondition("lh_session_set_eval: the session has started"));
    s->eval = fn;
    s->eval_user_data = user_data;
    return Ok();
  });
}

int lh_session_start_model(lh_session* s, float* params, uint64_t num_params, uint64_t num_buffers,
                           float* const* optimizer_state, uint64_t num_optimizer_state) {
  return Guard([&] {
    if (s == nullptr || params == nullptr || num_params == 0) {
      return Fail(longhaul::InvalidArgument("lh_session_start: needs a session and a non-empty parameter buffer"));
    }
    if (optimizer_state == nullptr && num_optimizer_state > 0)
      return Fail(longhaul::InvalidArgument("lh_session_start_model: optimizer_state is NULL"));
    longhaul::session::StartOptions options;
    options.buffers = num_buffers;
    options.tensors = s->tensors;
    if (s->eval != nullptr) {
      options.validation = [fn = s->eval, user = s->eval_user_data](std::span<const float>) -> longhaul::Result<double> {
        double loss = 0;
        const int code = fn(user, &loss);
        if (code != LH_OK) {
          const bool known = code > LH_OK && code <= LH_INTERNAL;
          return longhaul::Status(known ? static_cast<StatusCode>(code) : StatusCode::kInternal,
                                  "the eval callback returned " + std::to_string(code));
        }
        return loss;
      };
    }
    for (uint64_t i = 0; i < num_optimizer_state; ++i) {
      if (optimizer_state[i] == nullptr)
        return Fail(longhaul::InvalidArgument("lh_session_start_model: optimizer_state[" + std::to_string(i) +
                                              "] is NULL"));
      options.optimizer_state.emplace_back(optimizer_state[i], num_params);
    }
    longhaul::Status st = s->session->Start(std::span<float>(params, num_params), std::move(options));
    return st.ok() ? Ok() : Fail(st);
  });
}

int lh_session_start(lh_session* s, float* params, uint64_t num_params) {
  return lh_session_start_model(s, params, num_params, 0, nullptr, 0);
}

int lh_session_sync_gradients(lh_session* s, float* grad, uint64_t num_params) {
  return Guard([&] {
    if (s == nullptr) return Fail(longhaul::InvalidArgument("lh_session_sync_gradients: session is NULL"));
    if (grad == nullptr && num_params > 0)
      return Fail(longhaul::InvalidArgument("lh_session_sync_gradients: grad is NULL"));
    longhaul::Status synced = s->session->SyncGradients(std::span<float>(grad, num_params));
    return synced.ok() ? Ok() : Fail(synced);
  });
}

int lh_session_step(lh_session* s, float loss, uint64_t tokens, int* event) {
  return Guard([&] {
    if (s == nullptr) return Fail(longhaul::InvalidArgument("lh_session_step: session is NULL"));
    auto e = s->session->Step(loss, tokens);
    if (!e.ok()) return Fail(e.status());
    if (event != nullptr) *event = EventCode(*e);
    return Ok();
  });
}

int lh_session_fail_round(lh_session* s, const char* why, int* event) {
  return Guard([&] {
    if (s == nullptr) return Fail(longhaul::InvalidArgument("lh_session_fail_round: session is NULL"));
    auto e = s->session->FailRound(
        s->session->UserCodeFailed("the worker failed the round (lh_session_fail_round)", why != nullptr ? why : ""));
    if (!e.ok()) return Fail(e.status());
    if (event != nullptr) *event = EventCode(*e);
    return Ok();
  });
}

int lh_session_finished(const lh_session* s) { return s == nullptr || s->session->finished() ? 1 : 0; }
uint32_t lh_session_round(const lh_session* s) { return s ? s->session->round() : 0; }
uint32_t lh_session_committed_round(const lh_session* s) { return s ? s->session->committed_round() : 0; }
uint64_t lh_session_job_step(const lh_session* s) { return s ? s->session->job_step() : 0; }
const float* lh_session_theta(const lh_session* s) { return s ? s->session->theta().data() : nullptr; }
int lh_session_resynced_at_start(const lh_session* s) { return s != nullptr && s->session->resynced_at_start() ? 1 : 0; }

uint64_t lh_session_outer_state_size(const lh_session* s) {
  if (s == nullptr || s->session->replica() == nullptr) return 0;
  return s->session->replica()->OuterState().size();
}

int lh_session_outer_state(const lh_session* s, float* out, uint64_t size) {
  return Guard([&] {
    if (s == nullptr || s->session->replica() == nullptr)
      return Fail(longhaul::FailedPrecondition("lh_session_outer_state: the session has not started"));
    const std::vector<float> state = s->session->replica()->OuterState();
    if (size != state.size() || (out == nullptr && size > 0)) {
      return Fail(longhaul::InvalidArgument("lh_session_outer_state: the state holds " + std::to_string(state.size()) +
                                            " floats, got a buffer of " + std::to_string(size)));
    }
    std::copy(state.begin(), state.end(), out);
    return Ok();
  });
}

int lh_session_load_state(lh_session* s, const float* theta, uint64_t num_params, const float* outer,
                          uint64_t outer_size) {
  return Guard([&] {
    if (s == nullptr || s->session->replica() == nullptr)
      return Fail(longhaul::FailedPrecondition("lh_session_load_state: the session has not started"));
    if (theta == nullptr || (outer == nullptr && outer_size > 0))
      return Fail(longhaul::InvalidArgument("lh_session_load_state: theta or outer is NULL"));
    const longhaul::Status st = s->session->replica()->LoadState(std::span<const float>(theta, num_params),
                                                                 std::span<const float>(outer, outer_size));
    return st.ok() ? Ok() : Fail(st);
  });
}

int lh_session_theta_hash(const lh_session* s, char* buf, uint64_t size) {
  return Guard([&] {
    if (s == nullptr || buf == nullptr || size == 0) return Fail(longhaul::InvalidArgument("lh_session_theta_hash: bad arguments"));
    const std::string h = longhaul::ParameterHash(s->session->theta());
    if (h.size() + 1 > size) return Fail(longhaul::InvalidArgument("lh_session_theta_hash: buffer too small"));
    std::memcpy(buf, h.c_str(), h.size() + 1);
    return Ok();
  });
}

void lh_session_close(lh_session* s) { delete s; }

}  // extern "C"
