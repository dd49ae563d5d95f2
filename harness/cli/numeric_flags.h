// Ranges of numeric flags (docs/reliability.md, "Numeric flags"): every
// integer or real flag of every subcommand takes a range with a reason,
// checked on the text before it is converted, so "-1" never wraps to an
// unsigned 18446744073709551615 and a bound prints as a person writes it:
//   --threads: must be in [1, 1024] (threads of one rank), got 100000
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace shardcheck {

// An integer in [lo, hi]; `why` (may be empty) says what the bound protects.
CLI::Validator IntIn(long long lo, long long hi, const std::string& why = "");

// An integer of at least `min` ("must be at least 1, got 0"), bounded by hi.
CLI::Validator AtLeast(long long min, long long hi = 1LL << 53, const std::string& why = "");

// The largest --steps (and step counts such as --save-at) a run takes.
constexpr long long kMaxSteps = 10000000;

// A seed: an integer in [0, 2^63 - 1] ("-1" is refused, not wrapped).
CLI::Validator SeedRange();

// A real number in [lo, hi], or (lo, hi] when `open_lo` (a positive time).
CLI::Validator RealIn(double lo, double hi, const std::string& why = "", bool open_lo = false);

// "1", "0.5", "1e+09": a bound as a person writes it.
std::string Readable(double v);

}  // namespace shardcheck
