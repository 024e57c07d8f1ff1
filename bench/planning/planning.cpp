// bench_planning: sync_policies' CU model against Table 4 of Streaming DiLoCo
// (arXiv 2501.18512): each cell predicted under the paper's assumptions, the
// paper's figure and the deviation beside it. Pure computation, well under a second.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>

#include "paper_table.h"

int main(int argc, char** argv) {
  std::string out;
  CLI::App app{"bench_planning: the CU model against Streaming DiLoCo's Table 4"};
  app.add_option("--out", out, "also write planning_table4.md into this folder");
  CLI11_PARSE(app, argc, argv);
  auto table = longhaul::bench::Table4Markdown();
  if (!table.ok()) {
    std::fprintf(stderr, "bench_planning: %s\n", table.status().ToString().c_str());
    return 1;
  }
  const std::string text =
      "Bandwidth (Gbit/s) for each compute utilisation: the model's prediction (the paper's cell, deviation).\n\n" +
      *table;
  std::printf("%s", text.c_str());
  if (!out.empty()) {
    std::filesystem::create_directories(out);
    std::ofstream(std::filesystem::path(out) / "planning_table4.md")
        << "# bench_planning\n\nPrinted by `bench_planning` (see docs/planning.md). " << text;
  }
  return 0;
}
