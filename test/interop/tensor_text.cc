#include "tensor_text.h"

#include <cstring>
#include <fstream>

#include "varstate/error.h"

namespace varstate::interop {

std::string hex_encode(const void* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out(2 * size, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

std::string hex_decode(std::string_view hex) {
  auto digit = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw InvalidArgumentError("interop text: bad hex digit in " + quoted(hex));
  };
  if (hex.size() % 2 != 0)
    throw InvalidArgumentError("interop text: odd-length hex " + quoted(hex));
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<char>(digit(hex[2 * i]) * 16 + digit(hex[2 * i + 1]));
  }
  return out;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

TextTensor parse_line(const std::string& line) {
  std::vector<std::string> f = split(line, ' ');
  if (f.size() < 4)
    throw InvalidArgumentError("interop text: need KEY DTYPE DIMS DATA in " + quoted(line));
  TextTensor t;
  t.key = hex_decode(f[0] == "-" ? "" : f[0]);
  const int dtype = std::stoi(f[1]);
  if (!dtype_is_valid(dtype))
    throw InvalidArgumentError("interop text: bad dtype in " + quoted(line));
  t.dtype = static_cast<DType>(dtype);
  if (f[2] != "-") {
    for (const std::string& d : split(f[2], ',')) t.dims.push_back(std::stoll(d));
  }
  int64_t n = 1;
  for (int64_t d : t.dims) n *= d;
  const std::string data = f[3] == "-" ? "" : f[3];
  if (t.dtype == DType::kString) {
    if (n > 0) {
      for (const std::string& e : split(data, ',')) t.strings.push_back(hex_decode(e));
    }
    if (static_cast<int64_t>(t.strings.size()) != n) {
      throw InvalidArgumentError("interop text: " + std::to_string(t.strings.size()) +
                                 " strings for " + std::to_string(n) + " elements in " +
                                 quoted(line));
    }
  } else {
    const std::string bytes = hex_decode(data);
    if (bytes.size() != static_cast<size_t>(n) * dtype_size(t.dtype)) {
      throw InvalidArgumentError("interop text: " + std::to_string(bytes.size()) + " bytes for " +
                                 std::to_string(n) + " elements in " + quoted(line));
    }
    t.bytes.resize(bytes.size());
    std::memcpy(t.bytes.data(), bytes.data(), bytes.size());
  }
  t.extra.assign(f.begin() + 4, f.end());
  return t;
}

std::vector<TextTensor> read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw NotFoundError("interop text: cannot open " + quoted(path));
  std::vector<TextTensor> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(parse_line(line));
  }
  return out;
}

std::string format_line(const std::string& key, DType dtype, const std::vector<int64_t>& dims,
                        const void* data, size_t nbytes, const std::vector<std::string>& strings) {
  std::string out = key.empty() ? "-" : hex_encode(key.data(), key.size());
  out += " " + std::to_string(static_cast<int>(dtype)) + " ";
  if (dims.empty()) out += "-";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? "," : "") + std::to_string(dims[i]);
  out += " ";
  std::string body;
  if (dtype == DType::kString) {
    for (size_t i = 0; i < strings.size(); ++i) {
      body += (i ? "," : "") + hex_encode(strings[i].data(), strings[i].size());
    }
  } else {
    body = hex_encode(data, nbytes);
  }
  return out + (body.empty() ? "-" : body);
}

std::string format_line(const std::string& key, const Tensor& t) {
  const Tensor host = t.to_host();
  std::vector<std::string> strings;
  if (host.dtype() == DType::kString) strings = host.to_vector<std::string>();
  return format_line(key, host.dtype(), host.shape().dims(), host.raw_data(),
                     host.dtype() == DType::kString ? 0 : host.nbytes(), strings);
}

Tensor to_tensor(const TextTensor& t) {
  Tensor out(t.dtype, TensorShape(t.dims));
  if (t.dtype == DType::kString) {
    auto* p = out.data<std::string>();
    for (size_t i = 0; i < t.strings.size(); ++i) p[i] = t.strings[i];
  } else if (!t.bytes.empty()) {
    std::memcpy(out.raw_data(), t.bytes.data(), t.bytes.size());
  }
  return out;
}

}  // namespace varstate::interop
