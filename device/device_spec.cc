#include "varstate/device_spec.h"

#include <cctype>
#include <charconv>
#include <vector>

#include "varstate/error.h"

namespace varstate {
namespace {

[[noreturn]] void malformed(std::string_view text, const std::string& why) {
  throw InvalidArgumentError("malformed device specification " + quoted(text) + ": " + why);
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

int parse_int(std::string_view text, std::string_view field, std::string_view value) {
  int out = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (value.empty() || ec != std::errc() || ptr != value.data() + value.size() || out < 0) {
    malformed(text, std::string(field) + " must be a non-negative integer, got " + quoted(value));
  }
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool valid_type(std::string_view t) {
  if (t.empty()) return false;
  for (char c : t) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// Parses "TYPE", "TYPE:N" or "TYPE:*" into the spec's device fields.
void parse_device(std::string_view text, std::string_view type, std::string_view* index,
                  DeviceSpec& spec) {
  if (!valid_type(type)) malformed(text, "bad device type " + quoted(type));
  spec.device_type = upper(type);
  spec.device_index.reset();
  if (index && *index != "*") spec.device_index = parse_int(text, "device index", *index);
}

}  // namespace

DeviceSpec DeviceSpec::of(std::string_view type, int index) {
  DeviceSpec spec;
  spec.device_type = upper(type);
  spec.device_index = index;
  return spec;
}

DeviceSpec DeviceSpec::parse(std::string_view text) {
  DeviceSpec spec;
  if (text.empty()) return spec;
  if (text.front() != '/') {
    // Bare "TYPE[:INDEX]", e.g. "GPU:0".
    auto parts = split(text, ':');
    if (parts.size() > 2) malformed(text, "expected TYPE or TYPE:INDEX");
    parse_device(text, parts[0], parts.size() == 2 ? &parts[1] : nullptr, spec);
    return spec;
  }
  auto fields = split(text.substr(1), '/');
  bool seen_job = false, seen_replica = false, seen_task = false, seen_device = false;
  for (std::string_view field : fields) {
    if (field.empty()) malformed(text, "empty field");
    auto parts = split(field, ':');
    std::string key = upper(parts[0]);
    auto once = [&](bool& seen, const char* name) {
      if (seen) malformed(text, std::string(name) + " given twice");
      seen = true;
    };
    if (key == "JOB") {
      once(seen_job, "job");
      if (parts.size() != 2 || parts[1].empty()) malformed(text, "expected job:NAME");
      spec.job = std::string(parts[1]);
    } else if (key == "REPLICA") {
      once(seen_replica, "replica");
      if (parts.size() != 2) malformed(text, "expected replica:N");
      spec.replica = parse_int(text, "replica", parts[1]);
    } else if (key == "TASK") {
      once(seen_task, "task");
      if (parts.size() != 2) malformed(text, "expected task:N");
      spec.task = parse_int(text, "task", parts[1]);
    } else if (key == "DEVICE") {
      once(seen_device, "device");
      if (parts.size() < 2 || parts.size() > 3) malformed(text, "expected device:TYPE:INDEX");
      parse_device(text, parts[1], parts.size() == 3 ? &parts[2] : nullptr, spec);
    } else if (parts.size() <= 2 && (key == "CPU" || key == "GPU")) {
      // Legacy "/cpu:0", "/gpu:1".
      once(seen_device, "device");
      parse_device(text, parts[0], parts.size() == 2 ? &parts[1] : nullptr, spec);
    } else {
      malformed(text, "unknown field " + quoted(field));
    }
  }
  return spec;
}

DeviceSpec DeviceSpec::merged_with(const DeviceSpec& inner) const {
  DeviceSpec out = *this;
  if (inner.job) out.job = inner.job;
  if (inner.replica) out.replica = inner.replica;
  if (inner.task) out.task = inner.task;
  if (inner.device_type) {
    // A new device type resets the index unless the inner spec gives one.
    if (out.device_type != inner.device_type) out.device_index.reset();
    out.device_type = inner.device_type;
  }
  if (inner.device_index) out.device_index = inner.device_index;
  return out;
}

std::string DeviceSpec::to_string() const {
  std::string out;
  if (job) out += "/job:" + *job;
  if (replica) out += "/replica:" + std::to_string(*replica);
  if (task) out += "/task:" + std::to_string(*task);
  if (device_type) {
    out += "/device:" + *device_type + ":" +
           (device_index ? std::to_string(*device_index) : std::string("*"));
  }
  return out;
}

}  // namespace varstate
