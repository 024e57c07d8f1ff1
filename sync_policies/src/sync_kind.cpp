// The sync-kind table.
#include "longhaul/sync_policies/sync_kind.h"

#include <array>
#include <string>

namespace longhaul::sync_policies {
namespace {

// clang-format off
//  kind                         name                link   identical grads  theta=local streams outer  default codec
constexpr std::array<SyncKindTraits, 4> kKinds = {{
    {SyncKind::kDiLoCo,          "diloco",           true,  true,  false, false, false, true,  Codec::kInt8Block},
    {SyncKind::kStreamingDiLoCo, "streaming_diloco", true,  true,  false, false, true,  true,  Codec::kInt8Block},
    {SyncKind::kSync,            "sync",             true,  true,  true,  true,  false, false, Codec::kFp32},
    {SyncKind::kLocal,           "local",            false, false, false, true,  false, false, Codec::kFp32},
}};
// clang-format on

}  // namespace

std::span<const SyncKindTraits> SyncKinds() { return kKinds; }

const SyncKindTraits& Traits(SyncKind kind) {
  for (const auto& t : kKinds)
    if (t.kind == kind) return t;
  return kKinds[0];  // every enumerator is in the table (sync_kind_test checks)
}

std::string_view SyncKindName(SyncKind kind) { return Traits(kind).name; }

Result<SyncKind> ParseSyncKind(std::string_view name) {
  for (const auto& t : kKinds)
    if (t.name == name) return t.kind;
  return InvalidArgument("unknown sync kind '" + std::string(name) + "' (expected one of " + SyncKindNames() + ")");
}

std::string SyncKindNames() {
  std::string names;
  for (const auto& t : kKinds) names += (names.empty() ? "" : ", ") + std::string(t.name);
  return names;
}

}  // namespace longhaul::sync_policies
