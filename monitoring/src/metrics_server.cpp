#include "longhaul/monitoring/metrics_server.h"

#include <prometheus/text_serializer.h>

#include "http_server.h"
#include "longhaul/monitoring/web_config.h"

namespace longhaul::monitoring {

namespace {
constexpr const char* kPrometheusTextFormat = "text/plain; version=0.0.4; charset=utf-8";
}  // namespace

MetricsServer::MetricsServer() = default;
MetricsServer::~MetricsServer() = default;

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& bind_address) {
  MetricsServerOptions options;
  options.bind_address = bind_address;
  return Start(options);
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const MetricsServerOptions& options) {
  const std::string& address = options.bind_address;
  HttpServerOptions http;
  http.bind_address = address;
  http.request_timeout = options.request_timeout;
  http.max_connections = options.max_connections;
  if (!options.web_config_file.empty()) {
    auto web = LoadWebConfig(options.web_config_file);
    if (!web.ok()) return web.status();
    http.tls = web->tls;
    http.basic_auth_users = web->basic_auth_users;
  }

  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->registry_ = std::make_shared<prometheus::Registry>();
  std::shared_ptr<prometheus::Registry> registry = server->registry_;
  auto started = HttpServer::Start(http, [registry](std::string_view path) {
    HttpResponse r;
    if (path != "/metrics") {
      r.status = 404;
      r.body = "not found: this server serves /metrics\n";
      return r;
    }
    r.content_type = kPrometheusTextFormat;
    r.body = prometheus::TextSerializer{}.Serialize(registry->Collect());
    return r;
  });
  if (!started.ok()) return started.status();  // a bad address is refused there, naming what is wrong
  server->host_ = address.substr(0, address.rfind(':'));  // as written ("[::1]" keeps its brackets for the URL)
  server->http_ = std::move(*started);
  server->port_ = server->http_->port();
  server->tls_ = server->http_->tls();
  server->basic_auth_ = !http.basic_auth_users.empty();
  return server;
}

std::string MetricsServer::url() const {
  return std::string(tls_ ? "https://" : "http://") + host_ + ":" + std::to_string(port_) + "/metrics";
}

}  // namespace longhaul::monitoring
