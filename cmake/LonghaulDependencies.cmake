# Every third-party dependency is found here, once, the standard way for Debian 12.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)        # PkgConfig::ZMQ (no CMake config in Debian)
find_package(cppzmq 4.9 CONFIG REQUIRED)                      # cppzmq
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)  # PkgConfig::SODIUM
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)  # PkgConfig::XXHASH
find_package(Protobuf 3.21 REQUIRED)                          # protobuf::libprotobuf, protobuf_generate()
find_package(prometheus-cpp CONFIG REQUIRED)                  # no version file in Debian
find_package(CLI11 2.1 CONFIG REQUIRED)
find_package(Catch2 2.13 CONFIG REQUIRED)
find_package(Gloo CONFIG REQUIRED)                            # target: gloo
find_package(yaml-cpp 0.7 CONFIG REQUIRED)                    # target: yaml-cpp
find_package(nlohmann_json 3.11 CONFIG REQUIRED)
find_package(spdlog 1.10 CONFIG REQUIRED)
find_package(SQLite3 REQUIRED)                                # SQLite::SQLite3
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)                                   # BLAS::BLAS; cblas.h on the default path
