// longhaul._native: the worker library (longhaul/session/session.h) for Python.
//
// Zero-copy: the session works on the caller's flat fp32 buffer, handed over as
// a data pointer (the longhaul.torch wrapper makes every parameter a view of one
// flat tensor and keeps it alive). Every blocking call releases the GIL; the
// validation callback takes it back. C++ errors become longhaul.LonghaulError
// with the C++ message; a Python exception in the callback becomes the round's
// error (its text and traceback tail reach `longhaul status`).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>

#include "longhaul/common/checksum.h"
#include "longhaul/session/job_config_json.h"
#include "longhaul/session/session.h"

namespace py = pybind11;
namespace ls = longhaul::session;

namespace {

// A Status as the Python class of its code (longhaul/errors.py: one per
// StatusCode, all subclasses of LonghaulError).
[[noreturn]] void Raise(const longhaul::Status& s) {
  py::object cls = py::module_::import("longhaul.errors").attr("error_class")(static_cast<int>(s.code()));
  PyErr_SetObject(cls.ptr(), cls(s.ToString()).ptr());
  throw py::error_already_set();
}

template <typename T>
T Unwrap(longhaul::Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(*r);
}

// A ParameterMirror whose copies are the script's (longhaul.torch's host copy
// of parameters kept on a GPU): to_host(), to_device(), state_to_host() and
// state_to_device() on a Python object, called with the GIL taken. An
// exception becomes a Status naming the call.
class PyMirror final : public longhaul::worker::ParameterMirror {
 public:
  explicit PyMirror(py::object mirror) : mirror_(std::move(mirror)) {}
  ~PyMirror() override {
    py::gil_scoped_acquire acquire;
    mirror_ = py::object();
  }
  longhaul::Status ToHost() override { return Call("to_host"); }
  longhaul::Status ToDevice() override { return Call("to_device"); }
  longhaul::Status StateToHost() override { return Call("state_to_host"); }
  longhaul::Status StateToDevice() override { return Call("state_to_device"); }
  // A KeyboardInterrupt or SystemExit raised in a copy, to raise again in the
  // script once the session's call returns (with the GIL held).
  void RaisePending() {
    if (!pending_) return;
    py::error_already_set e = std::move(*pending_);
    pending_.reset();
    throw e;
  }

 private:
  longhaul::Status Call(const char* method) {
    py::gil_scoped_acquire acquire;
    try {
      mirror_.attr(method)();
      return longhaul::Status::Ok();
    } catch (py::error_already_set& e) {
      const std::string what = std::string("the host copy's ") + method + "() raised: " + e.what();
      if (e.matches(PyExc_KeyboardInterrupt) || e.matches(PyExc_SystemExit)) {
        if (!pending_) pending_.emplace(std::move(e));
        return longhaul::Cancelled(what);
      }
      return longhaul::Internal(what);
    }
  }
  py::object mirror_;
  std::optional<py::error_already_set> pending_;
};

class PySession {
 public:
  PySession() {
    py::gil_scoped_release release;  // Open forms the intra-region group: blocks on peers
    auto options = ls::SessionOptionsFromEnvironment();
    if (!options.ok()) {
      py::gil_scoped_acquire acquire;
      Raise(options.status());
    }
    auto s = ls::Session::Open(*options);
    if (!s.ok()) {
      py::gil_scoped_acquire acquire;
      Raise(s.status());
    }
    session_ = std::move(*s);
    config_json_ = ls::JobConfigJson(session_->config(), *options);
  }

  // tensors: [(name, shape, offset, numel)]; the last `buffers` floats are model
  // buffers; optimizer_state: data pointers of flat float32 tensors of n floats
  // (the optimizer's state); eval_fn: None or a callable -> float; mirror: None,
  // or the object whose copies keep `data` and optimizer_state (then host
  // copies) in step with the originals on a GPU (PyMirror).
  void Start(uintptr_t data, size_t n, const std::vector<std::tuple<std::string, std::vector<int64_t>, size_t, size_t>>& tensors,
             size_t buffers, const std::vector<uintptr_t>& optimizer_state, py::object eval_fn, py::object mirror) {
    if (data == 0 || n == 0) Raise(longhaul::InvalidArgument("start: the parameter buffer is empty"));
    if (started_) Raise(longhaul::FailedPrecondition("start: called twice"));
    started_ = true;  // before the mirror is set: the session keeps pointers to it
    ls::StartOptions opts;
    opts.buffers = buffers;
    if (!mirror.is_none()) {
      for (const char* method : {"to_host", "to_device", "state_to_host", "state_to_device"})
        if (!py::hasattr(mirror, method))
          Raise(longhaul::InvalidArgument(std::string("start: the mirror has no ") + method + "()"));
      mirror_ = std::make_unique<PyMirror>(mirror);
      opts.mirror = mirror_.get();
    }
    for (uintptr_t p : optimizer_state) {
      if (p == 0) Raise(longhaul::InvalidArgument("start: an optimizer state buffer is empty"));
      opts.optimizer_state.emplace_back(reinterpret_cast<float*>(p), n);
    }
    for (const auto& [name, shape, offset, numel] : tensors) {
      opts.tensors.push_back({.name = name, .shape = shape, .offset = offset, .numel = numel});
    }
    if (!eval_fn.is_none()) {
      eval_fn_ = std::make_shared<py::object>(eval_fn);
      opts.validation = [fn = eval_fn_, session = session_.get()](std::span<const float>) -> longhaul::Result<double> {
        py::gil_scoped_acquire acquire;
        try {
          return (*fn)().cast<double>();
        } catch (py::error_already_set& e) {
          return session->UserCodeFailed("eval_fn raised an exception", e.what());
        } catch (const py::cast_error& e) {
          return longhaul::InvalidArgument(std::string("eval_fn must return a number: ") + e.what());
        }
      };
    }
    longhaul::Status st;
    {
      py::gil_scoped_release release;
      st = session_->Start(std::span<float>(reinterpret_cast<float*>(data), n), std::move(opts));
    }
    if (mirror_) mirror_->RaisePending();
    if (!st.ok()) Raise(st);
  }

  std::string Step(float loss, uint64_t tokens) {
    longhaul::Result<ls::StepEvent> e = longhaul::Internal("unset");
    {
      py::gil_scoped_release release;
      e = session_->Step(loss, tokens);
    }
    if (mirror_) mirror_->RaisePending();
    return ls::StepEventName(Unwrap(std::move(e)));
  }

  // False when the exchange failed (the next step() rolls the round back).
  bool SyncGradients(uintptr_t data, size_t n) {
    longhaul::Status st;
    {
      py::gil_scoped_release release;
      st = session_->SyncGradients(std::span<float>(reinterpret_cast<float*>(data), n));
    }
    return st.ok();
  }

  std::string FailRound(const std::string& why) {
    longhaul::Result<ls::StepEvent> e = longhaul::Internal("unset");
    {
      py::gil_scoped_release release;
      e = session_->FailRound(session_->UserCodeFailed("the script failed the round (fail_round)", why));
    }
    if (mirror_) mirror_->RaisePending();
    return ls::StepEventName(Unwrap(std::move(e)));
  }

  py::bytes Theta() const {
    auto t = session_->theta();
    return py::bytes(reinterpret_cast<const char*>(t.data()), t.size() * sizeof(float));
  }
  py::bytes OuterState() const {
    auto* r = session_->replica();
    if (r == nullptr) Raise(longhaul::FailedPrecondition("the session has not started"));
    auto s = r->OuterState();
    return py::bytes(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(float));
  }
  void LoadState(uintptr_t theta, size_t theta_n, uintptr_t outer, size_t outer_n) {
    auto* r = session_->replica();
    if (r == nullptr) Raise(longhaul::FailedPrecondition("the session has not started"));
    longhaul::Status st = r->LoadState(std::span<const float>(reinterpret_cast<const float*>(theta), theta_n),
                                       std::span<const float>(reinterpret_cast<const float*>(outer), outer_n));
    if (mirror_) mirror_->RaisePending();
    if (!st.ok()) Raise(st);
  }

  ls::Session& session() { return *session_; }
  const std::string& config_json() const { return config_json_; }

 private:
  bool started_ = false;
  std::unique_ptr<PyMirror> mirror_;  // outlives session_ (declared first: destroyed last)
  std::unique_ptr<ls::Session> session_;
  std::string config_json_;
  std::shared_ptr<py::object> eval_fn_;
};

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "longhaul worker library (use longhaul.torch)";
  m.attr("LonghaulError") = py::module_::import("longhaul.errors").attr("LonghaulError");
  m.def("job_config_json", [] { return Unwrap(ls::JobConfigJsonFromEnvironment()); },
        "The job as JSON, read from the environment the agent set (no connection made).");
  m.def("parameter_hash", [](uintptr_t data, size_t n) {
    return longhaul::ParameterHash(std::span<const float>(reinterpret_cast<const float*>(data), n));
  });
  py::class_<PySession>(m, "Session")
      .def(py::init<>())
      .def("start", &PySession::Start, py::arg("data_ptr"), py::arg("numel"), py::arg("tensors"), py::arg("buffers"), py::arg("optimizer_state"), py::arg("eval_fn"),
           py::arg("mirror") = py::none())
      .def("step", &PySession::Step, py::arg("loss"), py::arg("tokens"))
      .def("sync_gradients", &PySession::SyncGradients, py::arg("data_ptr"), py::arg("numel"))
      .def_property_readonly("syncs_gradients", [](PySession& s) { return s.session().syncs_gradients(); })
      .def("fail_round", &PySession::FailRound)
      .def("theta", &PySession::Theta)
      .def("outer_state", &PySession::OuterState)
      .def("load_state", &PySession::LoadState)
      .def_property_readonly("config_json", &PySession::config_json)
      .def_property_readonly("finished", [](PySession& s) { return s.session().finished(); })
      .def_property_readonly("round", [](PySession& s) { return s.session().round(); })
      .def_property_readonly("committed_round", [](PySession& s) { return s.session().committed_round(); })
      .def_property_readonly("job_step", [](PySession& s) { return s.session().job_step(); })
      .def_property_readonly("resynced_at_start", [](PySession& s) { return s.session().resynced_at_start(); });
}
