// The main of every test binary but the gpu ones (catch_gpu_main.cpp).
#include "catch_runner.h"

int main(int argc, char** argv) { return longhaul::testing::RunCatch(argc, argv); }
