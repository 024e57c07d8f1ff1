// The `longhaul-worker` process: one worker of the built-in trainer, one client
// of the worker library (longhaul/session/session.h) like any user program.
//
// It opens the Session from the environment the agent set, builds the job's data
// and the ByteLM trainer over the session's intra-region group, starts the
// session on the model's flat parameters (AdamW moments as the InnerState, so a
// rolled-back round leaves no trace), then trains: one Session::Step per inner
// step until the job is finished.
#pragma once

#include "longhaul/session/session_options.h"

namespace longhaul::worker {

// The job's last round evaluates this many times the held-out batches of the
// other rounds (SessionOptions::validation_batches): the final validation loss
// is the figure runs are compared by, so it gets the precise estimate.
inline constexpr int kFinalValidationFactor = 16;

// Returns the process exit code: 0 when the job finished, 2 when start-up
// failed (the agent has been told why), 1 when the session broke.
int RunBuiltinWorker(session::SessionOptions options);

}  // namespace longhaul::worker
