#include "harness/cell/compare.h"

#include <c10/util/BFloat16.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "spec/schema.h"

namespace shardcheck {

namespace {

constexpr size_t kFirstMismatches = 5;

// Maps a float's bits to an integer line where neighbours differ by 1.
int64_t Ordered(int64_t bits, int width) {
  const int64_t sign = int64_t{1} << (width - 1);
  return (bits & sign) ? -(bits & (sign - 1)) : bits;
}

int64_t RawBits(const at::Tensor& t, int64_t i) {
  const char* p = static_cast<const char*>(t.data_ptr()) + i * t.element_size();
  switch (t.element_size()) {
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case 8: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    default:
      return static_cast<unsigned char>(*p);
  }
}

void Prepare(TensorDiff& d, const at::Tensor& a, const at::Tensor& b) {
  d.numel = a.numel();
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) {
    d.shape_or_dtype_differs = true;
    std::ostringstream s;
    s << "shape/dtype " << a.sizes() << " " << DtypeName(a.scalar_type()) << " vs " << b.sizes()
      << " " << DtypeName(b.scalar_type());
    d.note = s.str();
  }
}

bool SignChange(double x, double y) { return (x < 0 && y > 0) || (x > 0 && y < 0); }

// Adds one differing pair to the figures (max abs/rel, same-sign ULP).
void Measure(TensorDiff& d, double x, double y, int64_t ulp, double rel_floor) {
  const double abs = std::fabs(x - y);
  d.max_abs = std::max(d.max_abs, abs);
  d.max_rel = std::max(d.max_rel, abs / std::max(std::fabs(y), rel_floor));
  if (SignChange(x, y))
    ++d.sign_changes;
  else
    d.max_ulp = std::max(d.max_ulp, ulp);
}

void Account(TensorDiff& d, int64_t i, double x, double y, int64_t ulp, double rel_floor) {
  ++d.mismatches;
  const double abs = std::fabs(x - y);
  if (abs > d.max_abs || d.worst_index < 0) {
    d.max_abs = abs;
    d.worst_index = i;
    d.worst_a = x;
    d.worst_b = y;
  }
  Measure(d, x, y, ulp, rel_floor);
  if (d.first.size() < kFirstMismatches) d.first.push_back({i, x, y});
}

}  // namespace

int64_t UlpDistance(const at::Tensor& a, const at::Tensor& b, int64_t i) {
  const int width = static_cast<int>(a.element_size()) * 8;
  if (!at::isFloatingType(a.scalar_type())) return std::llabs(RawBits(a, i) - RawBits(b, i));
  return std::llabs(Ordered(RawBits(a, i), width) - Ordered(RawBits(b, i), width));
}

TensorDiff CompareBitwise(const std::string& name, const at::Tensor& a_in, const at::Tensor& b_in,
                          double rel_floor) {
  TensorDiff d;
  d.name = name;
  Prepare(d, a_in, b_in);
  if (d.shape_or_dtype_differs) return d;
  const at::Tensor a = a_in.contiguous().cpu(), b = b_in.contiguous().cpu();
  const size_t es = a.element_size();
  const char* pa = static_cast<const char*>(a.data_ptr());
  const char* pb = static_cast<const char*>(b.data_ptr());
  if (std::memcmp(pa, pb, es * static_cast<size_t>(a.numel())) == 0) return d;
  const at::Tensor fa = a.to(at::kDouble), fb = b.to(at::kDouble);
  const double* xa = fa.data_ptr<double>();
  const double* xb = fb.data_ptr<double>();
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(pa + i * es, pb + i * es, es) != 0)
      Account(d, i, xa[i], xb[i], UlpDistance(a, b, i), rel_floor);
  return d;
}

TensorDiff CompareTolerance(const std::string& name, const at::Tensor& a_in, const at::Tensor& b_in,
                            double rtol, double atol, int64_t max_ulp) {
  TensorDiff d;
  d.name = name;
  Prepare(d, a_in, b_in);
  if (d.shape_or_dtype_differs) return d;
  const at::Tensor a = a_in.contiguous().cpu(), b = b_in.contiguous().cpu();
  const at::Tensor fa = a.to(at::kDouble), fb = b.to(at::kDouble);
  const double* xa = fa.data_ptr<double>();
  const double* xb = fb.data_ptr<double>();
  const double rel_floor = RelFloor(atol);
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = xa[i], y = xb[i];
    if (x == y || (std::isnan(x) && std::isnan(y))) continue;
    const int64_t ulp = UlpDistance(a, b, i);
    const bool ulp_ok = max_ulp < 0 || (!SignChange(x, y) && ulp <= max_ulp);
    const bool ok = std::fabs(x - y) <= atol + rtol * std::fabs(y) && ulp_ok;
    if (!ok)
      Account(d, i, x, y, ulp, rel_floor);
    else
      Measure(d, x, y, ulp, rel_floor);  // differences within tolerance have figures too
  }
  return d;
}

std::string TensorDiff::Summary() const {
  std::ostringstream s;
  s << name << ": ";
  if (shape_or_dtype_differs) {
    s << note;
    return s.str();
  }
  if (mismatches == 0) {
    s << "equal (" << numel << " elements";
    if (max_abs > 0)
      s << ", max abs " << max_abs << ", max rel " << max_rel << ", max ulp " << max_ulp;
    if (sign_changes > 0) s << ", " << sign_changes << " sign changes";
    s << ")";
    return s.str();
  }
  s.precision(9);
  s << mismatches << "/" << numel << " differ, max abs " << max_abs << " at [" << worst_index
    << "] (a=" << worst_a << " b=" << worst_b << "), max rel " << max_rel << ", max ulp "
    << max_ulp;
  if (sign_changes > 0) s << " (" << sign_changes << " sign changes)";
  s << "; first:";
  for (const auto& m : first) s << " [" << m.index << "] " << m.a << " vs " << m.b << ";";
  return s.str();
}

}  // namespace shardcheck
