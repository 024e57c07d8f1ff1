#include "harness.h"

#include <algorithm>
#include <fstream>

#include "longhaul/common/checksum.h"
#include "longhaul/common/random_token.h"
#include "longhaul/orchestrator/cli.h"

namespace longhaul::testing {

void MakeKeys(const fs::path& dir, const std::vector<std::string>& names, const std::vector<std::string>& allowed) {
  fs::create_directories(dir / "allow");
  std::ofstream roles(dir / "allow" / "roles");
  for (const auto& n : names) {
    auto keys = wan_transport::GenerateCurveKeyPair().value();
    if (!wan_transport::WriteKeyPair(dir, n, keys).ok()) throw std::runtime_error("cannot write keys " + n);
    for (const auto& a : allowed) {
      if (a != n) continue;
      fs::copy_file(dir / (n + ".pub"), dir / "allow" / (n + ".pub"));  // public keys only
      // "cli" is the admin, "user*" keys are users; every other key is its region's agent.
      roles << n << (n == "cli" ? " admin\n" : n.rfind("user", 0) == 0 ? " user\n" : " agent " + n + "\n");
    }
  }
}

std::string HttpGet(const std::string& url) {
  // http://127.0.0.1:PORT/path only.
  const std::string prefix = "http://127.0.0.1:";
  if (url.rfind(prefix, 0) != 0) return "";
  const auto slash = url.find('/', prefix.size());
  const int port = std::stoi(url.substr(prefix.size(), slash - prefix.size()));
  return testing::HttpGet(port, slash == std::string::npos ? "/" : url.substr(slash)).value_or("");
}

FakeAgent::FakeAgent(FakeAgentOptions o) : o_(std::move(o)), session_(RandomToken()) {
  orchestrator::ControlClientOptions co;
  co.endpoint = o_.endpoint;
  co.own_keys = wan_transport::LoadKeyPair(o_.key_file).value();
  co.server_public_key = o_.server_public_key;
  co.sender = o_.region;
  client_ = std::move(orchestrator::ControlClient::Connect(co).value());
  thread_ = std::thread([this] { Loop(); });
}

FakeAgent::~FakeAgent() {
  stop_ = true;
  thread_.join();
}

std::vector<uint32_t> FakeAgent::committed() const {
  std::lock_guard<std::mutex> l(mu_);
  return committed_;
}
std::set<std::string> FakeAgent::stopped_jobs() const {
  std::lock_guard<std::mutex> l(mu_);
  return stopped_;
}
Status FakeAgent::last_error() const {
  std::lock_guard<std::mutex> l(mu_);
  return last_error_;
}

void FakeAgent::ReportLinks(std::vector<v1::LinkSample> links) {
  std::lock_guard<std::mutex> l(mu_);
  links_to_report_ = std::move(links);
}

void FakeAgent::Loop() {
  auto next_hb = std::chrono::steady_clock::now();
  auto next_register = next_hb;
  uint64_t seq = 0;
  while (!stop_) {
    const auto now = std::chrono::steady_clock::now();
    if (silent_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (!registered_ && now >= next_register) {
      v1::ControlMessage m;
      m.mutable_register_region()->set_region(o_.region);
      m.mutable_register_region()->mutable_capacity()->set_workers(4);
      m.mutable_register_region()->set_data_host("127.0.0.1");
      m.mutable_register_region()->set_session_id(session_);
      (void)client_->Send(m);
      next_register = now + std::chrono::milliseconds(500);
    }
    if (registered_) {
      v1::ControlMessage m;
      {
        std::lock_guard<std::mutex> l(mu_);
        for (auto& s : links_to_report_) *m.mutable_link_report()->add_links() = std::move(s);
        links_to_report_.clear();
      }
      if (m.has_link_report()) {
        m.mutable_link_report()->set_region(o_.region);
        (void)client_->Send(m);
      }
    }
    if (registered_ && now >= next_hb) {
      v1::ControlMessage m;
      auto* hb = m.mutable_heartbeat();
      hb->set_region(o_.region);
      hb->set_seq(++seq);
      hb->set_healthy(true);
      {
        std::lock_guard<std::mutex> l(mu_);
        for (const auto& j : running_) hb->add_running_jobs(j);
      }
      (void)client_->Send(m);
      next_hb = now + o_.heartbeat;
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (now < it->due) {
        ++it;
        continue;
      }
      const auto& c = it->cmd;
      v1::ControlMessage m;
      auto* r = m.mutable_round_report();
      r->set_job_id(c.job_id());
      r->set_round(c.round());
      r->set_epoch(c.epoch());
      r->set_region(o_.region);
      r->set_ok(true);
      // Honest replicas agree: the hash depends on the job and round only.
      const std::string basis = c.job_id() + "/" + std::to_string(c.round()) + (bad_hash_ ? "/" + o_.region : "");
      r->set_param_hash(std::to_string(Checksum64(basis)));
      r->set_loss(3.0 / (1 + c.round()));
      r->set_val_loss(3.1 / (1 + c.round()));
      r->set_tokens(4096);
      r->set_wan_bytes_sent(10000);
      r->set_comm_seconds(0.01);
      r->set_wall_seconds(std::chrono::duration<double>(o_.round_time).count());
      (void)client_->Send(m);
      it = pending_.erase(it);
    }
    auto msg = client_->Receive(std::chrono::milliseconds(10));
    if (msg.ok()) {
      Handle(*msg);
    } else if (msg.status().code() != StatusCode::kDeadlineExceeded) {
      std::lock_guard<std::mutex> l(mu_);
      last_error_ = msg.status();
      if (msg.status().code() == StatusCode::kPermissionDenied) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void FakeAgent::Handle(const v1::ControlMessage& m) {
  if (m.has_register_reply()) {
    registered_ = m.register_reply().accepted();
  } else if (m.has_error()) {
    // "not registered": the orchestrator restarted; register again.
    if (m.error().code() == v1::ERROR_CODE_NOT_FOUND) registered_ = false;
  } else if (m.has_job_assignment()) {
    const auto& a = m.job_assignment();
    ++assignments_;
    if (!o_.answer_assignments) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      running_.insert(a.job_id());
    }
    v1::ControlMessage r;
    r.mutable_job_ready()->set_job_id(a.job_id());
    r.mutable_job_ready()->set_region(o_.region);
    for (uint32_t i = 0; i < a.spec().workers_per_region(); ++i)
      r.mutable_job_ready()->mutable_endpoint()->add_shard_endpoints("tcp://127.0.0.1:9/" + o_.region);
    (void)client_->Send(r);
  } else if (m.has_round_command()) {
    const auto& c = m.round_command();
    if (c.kind() == v1::RoundCommand::START) {
      pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                    [&](const Pending& p) { return p.cmd.job_id() == c.job_id(); }),
                     pending_.end());
      pending_.push_back({c, std::chrono::steady_clock::now() + o_.round_time});
    } else if (c.kind() == v1::RoundCommand::STOP) {
      std::lock_guard<std::mutex> l(mu_);
      running_.erase(c.job_id());
      stopped_.insert(c.job_id());
    }
  } else if (m.has_round_verdict() && m.round_verdict().committed()) {
    std::lock_guard<std::mutex> l(mu_);
    committed_.push_back(m.round_verdict().round());
  }
}

}  // namespace longhaul::testing
