// The main of every test binary but the gpu ones (catch_gpu_main.cpp). A case
// that cannot run here ends the process with the skip code (support/skip.h).
#include "catch_runner.h"

int main(int argc, char** argv) { return longhaul::testing::RunCatch(argc, argv); }
