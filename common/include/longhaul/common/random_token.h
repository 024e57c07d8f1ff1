// Random secrets and unique keys: 128 bits from the OS (std::random_device,
// /dev/urandom on Linux) as 32 hex digits.
#pragma once

#include <string>
#include <string_view>

namespace longhaul {

std::string RandomToken();
// Equal, in time that depends on the lengths only (a secret is not guessed a
// character at a time).
bool TokensEqual(std::string_view a, std::string_view b);

}  // namespace longhaul
