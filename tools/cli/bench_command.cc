// `varstate bench [--filter REGEX] [--out DIR] [--full]`: the benchmark suite.
//
// Runs the Google Benchmark binaries found next to the CLI (build tree:
// ../bench/; GPU bundle: the same folder), each writing JSON under --out
// with the machine, devices and versions in its "context" and, per figure,
// its own GB/s next to the limit measured in the same run (bench_util.h).
// Then summarizes every figure in a Markdown table and draws PNG plots with
// gnuplot: GB/s vs size per device with each limit as a dashed line, and
// varstate vs PyTorch for the comparison files (*-vs-torch-*.json) the
// bench/compare_torch_*.py scripts wrote into the same folder.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

extern char** environ;

namespace varstate::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The suite, in the order it runs.
const char* const kBenchmarks[] = {"bench_dense_update", "bench_math_ops", "bench_variables",
                                   "bench_scatter",      "bench_random",   "bench_checkpoint",
                                   "bench_sharing",      "bench_optimizer"};

struct BenchOptions {
  std::string filter = ".";
  std::string out = "bench/results";
  bool full = false;
  bool plots = true;
};

// Folders that may hold the benchmark binaries: the CLI's own (GPU bundle),
// ../../bench (build tree: the CLI is built in tools/cli/), ../bin.
std::vector<fs::path> search_dirs() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  fs::path dir = self.parent_path();
  return {dir, dir.parent_path().parent_path() / "bench", dir.parent_path() / "bin"};
}

std::optional<fs::path> find_binary(const std::string& name) {
  for (const fs::path& dir : search_dirs()) {
    fs::path p = dir / name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return std::nullopt;
}

// Runs argv[0] with `argv`, stdout and stderr shared with ours, or with
// stdout into the file `output` and stderr discarded; exit status.
int run_process(const std::vector<std::string>& args, const fs::path* output = nullptr) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (output) {
    posix_spawn_file_actions_addopen(&actions, 1, output->c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw UnavailableError("cannot run " + varstate::quoted(args[0]) + ": " + std::strerror(rc));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw InternalError("waitpid for " + varstate::quoted(args[0]) + " failed");
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string sanitize(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_') c = '-';
  }
  return s;
}

// "<host>-<N>cpu-<first GPU model or nogpu>", used in file names.
std::string machine_name() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  auto& dm = DeviceManager::instance();
  std::string gpu = "nogpu";
  for (Device* d : dm.devices()) {
    if (d->is_gpu()) {
      gpu = d->model();
      break;
    }
  }
  return sanitize(std::string(host) + "-" + std::to_string(std::thread::hardware_concurrency()) +
                  "cpu-" + gpu);
}

std::string devices_description() {
  std::string s;
  for (Device* d : DeviceManager::instance().devices()) {
    if (!s.empty()) s += "; ";
    s += d->name() + " " + d->model() + " " + std::to_string(d->total_memory() >> 20) + " MiB";
  }
  // Google Benchmark splits --benchmark_context at commas and '='.
  for (char& c : s) {
    if (c == ',' || c == '=') c = ' ';
  }
  return s;
}

// Compiler and configuration of this build, for the results' context.
std::string build_description() {
  std::string s;
#if defined(__clang__)
  s = "clang " __clang_version__;
#elif defined(__GNUC__)
  s = "gcc " __VERSION__;
#endif
#ifdef VARSTATE_HAVE_CUDA
  s += " + CUDA";
#else
  s += " CPU-only";
#endif
#ifdef NDEBUG
  s += " release";
#else
  s += " debug";
#endif
  for (char& c : s) {
    if (c == ',' || c == '=') c = ' ';
  }
  return s;
}

// ---- Parsing benchmark names into plot series -------------------------------

struct Point {
  std::string series;  // the name without its size and device
  std::string device;  // "cpu" or "gpu"
  std::optional<double> size;
  double gbps = 0, limit = 0;
  std::string name;
};

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

// BM_<dev>_<op>/<MiB>/...: size = MiB; scatter/<dev>/<op>/.../M<updates>/...:
// size = updates; names without either (checkpoint) have no size.
Point parse_point(const std::string& name, double gbps, double limit, std::string* size_unit) {
  Point p{.gbps = gbps, .limit = limit, .name = name};
  std::vector<std::string> tokens;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    tokens.push_back(name.substr(start, end - start));
    start = end + 1;
  }
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool gpu = lower.find("gpu") != std::string::npos ||
                   lower.find("host_to_device") != std::string::npos ||
                   lower.find("device_to_host") != std::string::npos;
  p.device = gpu ? "gpu" : "cpu";
  std::string series;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string t = tokens[i];
    if (t.rfind("iterations:", 0) == 0 || t == "manual_time" || t == "real_time" ||
        t == "scatter" || t == "cpu" || t == "gpu") {
      continue;
    }
    if (!p.size && all_digits(t)) {
      p.size = std::stod(t);
      *size_unit = "MiB";
      continue;
    }
    if (!p.size && t.size() > 1 && t[0] == 'M' && all_digits(t.substr(1))) {
      p.size = std::stod(t.substr(1));
      *size_unit = "updates per call";
      continue;
    }
    if (t.rfind("BM_", 0) == 0) t = t.substr(3);
    if (t.rfind("cpu_", 0) == 0 || t.rfind("gpu_", 0) == 0) t = t.substr(4);
    series += (series.empty() ? "" : "/") + t;
  }
  p.series = series.empty() ? name : series;
  return p;
}

std::string gnuplot_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Runs gnuplot on `script` (written to script_path), then removes the
// script and its data file: only the PNG stays.
bool run_gnuplot(const fs::path& script_path, const fs::path& data_path,
                 const std::string& script) {
  {
    std::ofstream out(script_path);
    out << script;
    if (!out) throw InvalidArgumentError("cannot write " + varstate::quoted(script_path.string()));
  }
  const bool ok = run_process({"gnuplot", script_path.string()}) == 0;
  std::error_code ec;
  fs::remove(script_path, ec);
  fs::remove(data_path, ec);
  return ok;
}

const char* kPalette[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e",
                          "#e6ab02", "#a6761d", "#666666", "#1f78b4", "#b2182b"};

// GB/s vs size for one benchmark file and device, every series with its
// same-run limit as a dashed line; a bar chart when the figures have no size.
std::optional<fs::path> plot_throughput(const fs::path& dir, const std::string& stem,
                                        const std::string& device, const std::vector<Point>& points,
                                        const std::string& size_unit, const std::string& machine) {
  std::map<std::string, std::vector<const Point*>> series;
  bool sized = true;
  std::set<double> sizes;
  for (const Point& p : points) {
    if (p.device != device) continue;
    series[p.series].push_back(&p);
    sized = sized && p.size.has_value();
    if (p.size) sizes.insert(*p.size);
  }
  sized = sized && sizes.size() > 1;  // one size: a bar chart reads better
  if (series.empty()) return std::nullopt;
  const std::string base = stem + "-" + device;
  const fs::path data = dir / (base + ".dat"), script = dir / (base + ".gp"),
                 png = dir / (base + ".png");
  std::ofstream out(data);
  std::string s =
      "set terminal pngcairo noenhanced size 960,600 font 'sans,10'\nset output " +
      gnuplot_quote(png.string()) + "\nset title " +
      gnuplot_quote(stem.substr(0, stem.find("-" + machine)) + " on " + device + ", " + machine) +
      "\nset ylabel 'GB/s (bytes read + written per second)'\nset grid\n"
      "set key below\nset yrange [0:*]\n";
  if (sized) {
    s += "set xlabel " + gnuplot_quote(size_unit + " (log scale)") + "\nset logscale x 2\n";
    // One grey limit line when every series has the same limits (the
    // usual case: the limit depends on the bytes moved, not the op).
    std::vector<std::pair<double, double>> first_limits;
    bool shared_limit = true;
    for (auto& [name, pts] : series) {
      std::sort(pts.begin(), pts.end(),
                [](const Point* a, const Point* b) { return *a->size < *b->size; });
      std::vector<std::pair<double, double>> limits;
      for (const Point* p : pts) limits.emplace_back(*p->size, p->limit);
      if (first_limits.empty()) first_limits = limits;
      shared_limit = shared_limit && limits == first_limits;
    }
    std::string plot = "plot ";
    int index = 0;
    for (auto& [name, pts] : series) {
      out << "# " << name << "\n";
      for (const Point* p : pts) out << *p->size << " " << p->gbps << " " << p->limit << "\n";
      out << "\n\n";
      const std::string color = kPalette[index % std::size(kPalette)];
      const std::string source = gnuplot_quote(data.string()) + " index " + std::to_string(index);
      plot += std::string(index ? ", \\\n     " : "") + source +
              " using 1:2 with linespoints lw 2 pt 7 lc rgb '" + color + "' title " +
              gnuplot_quote(name);
      if (!shared_limit || index == 0) {
        plot += ", \\\n     " + source + " using 1:3 with lines dt 2 lw 2 lc rgb '" +
                (shared_limit ? std::string("#555555") : color) + "' title " +
                gnuplot_quote(shared_limit ? "limit (same run)" : name + ": limit (same run)");
      }
      ++index;
    }
    s += plot + "\n";
  } else {
    s += "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 "
         "border -1\n"
         "set xtics rotate by -30 left\nset bmargin 9\nset key inside top right\n";
    for (auto& [name, pts] : series) {
      for (const Point* p : pts)
        out << gnuplot_quote(name) << " " << p->gbps << " " << p->limit << "\n";
    }
    s += "plot " + gnuplot_quote(data.string()) + " using 2:xtic(1) title 'varstate' lc rgb '" +
         kPalette[0] + "', '' using 3 title 'limit (same run)' lc rgb '#bbbbbb'\n";
  }
  out.close();
  if (!run_gnuplot(script, data, s)) return std::nullopt;
  return png;
}

// varstate vs PyTorch for a compare_torch_*.py result: GB/s of both per case.
std::optional<fs::path> plot_torch(const fs::path& file) {
  std::ifstream in(file);
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.contains("results") || !doc["results"].is_array())
    return std::nullopt;
  const std::string stem = file.stem().string();
  const fs::path data = file.parent_path() / (stem + ".dat"),
                 script = file.parent_path() / (stem + ".gp"),
                 png = file.parent_path() / (stem + ".png");
  std::ofstream out(data);
  int rows = 0;
  for (const json& r : doc["results"]) {
    if (!r.contains("name") || !r.contains("GBps") || !r.contains("ours_GBps")) continue;
    if (!r["GBps"].is_number() || !r["ours_GBps"].is_number()) continue;
    std::string name = r["name"].get<std::string>();
    for (const char* drop : {"scatter/", "cpu/", "gpu/", "serial-order/", "/i64/f32"}) {
      if (size_t pos = name.find(drop); pos != std::string::npos)
        name.erase(pos, std::strlen(drop));
    }
    out << gnuplot_quote(name) << " " << r["ours_GBps"].get<double>() << " "
        << r["GBps"].get<double>() << "\n";
    ++rows;
  }
  out.close();
  if (rows == 0) return std::nullopt;
  std::string torch = doc.contains("context") && doc["context"].contains("torch")
                          ? "PyTorch " + doc["context"]["torch"].get<std::string>()
                          : "PyTorch";
  const std::string s =
      "set terminal pngcairo noenhanced size 1200,700 font 'sans,10'\nset output " +
      gnuplot_quote(png.string()) + "\nset title " +
      gnuplot_quote("varstate vs " + torch + " (" + stem + ")") +
      "\nset ylabel 'GB/s'\nset grid ytics\nset yrange [0:*]\nset key top right\n"
      "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 "
      "border -1\n"
      "set xtics rotate by -40 left font ',8'\nset bmargin 12\nset rmargin 16\n"
      "plot " +
      gnuplot_quote(data.string()) + " using 2:xtic(1) title 'varstate' lc rgb '" + kPalette[0] +
      "', '' using 3 title " + gnuplot_quote(torch) + " lc rgb '" + kPalette[1] + "'\n";
  if (!run_gnuplot(script, data, s)) return std::nullopt;
  return png;
}

// Google Benchmark's own numeric fields (not user counters).
const std::set<std::string> kStandardFields = {"family_index", "per_family_instance_index",
                                               "repetitions",  "repetition_index",
                                               "threads",      "iterations",
                                               "real_time",    "cpu_time"};

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// The benchmark binaries of the suite found next to the CLI, in suite order.
std::vector<std::pair<std::string, fs::path>> find_benchmarks() {
  std::vector<std::pair<std::string, fs::path>> binaries;
  for (const char* name : kBenchmarks) {
    if (auto p = find_binary(name)) binaries.emplace_back(name, *p);
  }
  if (binaries.empty()) {
    std::string where;
    for (const fs::path& d : search_dirs()) where += (where.empty() ? "" : ", ") + d.string();
    throw NotFoundError("no benchmark binaries (bench_*) in " + where +
                        "; build with -DVARSTATE_BUILD_BENCH=ON");
  }
  return binaries;
}

// True when --filter selects a benchmark of `exe` (Google Benchmark's
// --benchmark_list_tests), or when the binary cannot list them: its run
// then reports the error.
bool has_matching_benchmark(const BenchOptions& o, const std::string& name, const fs::path& exe) {
  const fs::path list = fs::path(o.out) / ("." + name + ".list.partial");
  const int rc = run_process(
      {exe.string(), "--benchmark_list_tests=true", "--benchmark_filter=" + o.filter}, &list);
  std::ifstream in(list);
  std::string line;
  bool any = false;
  while (!any && std::getline(in, line)) any = !line.empty();
  in.close();
  std::error_code ec;
  fs::remove(list, ec);
  return rc != 0 || any;
}

// Where a binary's results for `machine` go: --out/<name without bench_>-<machine>.json.
fs::path result_file(const BenchOptions& o, const std::string& name, const std::string& machine) {
  return fs::path(o.out) / (name.substr(6) + "-" + machine + ".json");
}

// Runs one benchmark binary with --filter, its JSON context naming the
// machine, devices and build. The result file, or nothing when the filter
// matched none of its benchmarks: it is written under a temporary name
// first, so such a binary keeps the results of an earlier run.
std::optional<fs::path> run_benchmark(const BenchOptions& o, const std::string& name,
                                      const fs::path& exe, const std::string& machine,
                                      const std::string& devices) {
  const fs::path file = result_file(o, name, machine);
  const fs::path partial = fs::path(file).concat(".partial");
  std::printf("== %s -> %s\n", name.c_str(), file.c_str());
  const int rc = run_process(
      {exe.string(), "--benchmark_filter=" + o.filter, "--benchmark_out=" + partial.string(),
       "--benchmark_out_format=json",
       "--benchmark_context=varstate_machine=" + machine + ",varstate_devices=" + devices +
           ",varstate_version=" VARSTATE_VERSION_STRING ",varstate_build=" + build_description() +
           ",varstate_run=" + (o.full ? "full" : "quick")});
  if (rc != 0) {
    fs::remove(partial);
    throw UnknownError(name + " exited with status " + std::to_string(rc));
  }
  std::ifstream in(partial);
  json doc = json::parse(in, nullptr, false);
  in.close();
  if (doc.is_discarded() || !doc.contains("benchmarks") || doc["benchmarks"].empty()) {
    std::error_code ec;
    fs::remove(partial, ec);  // the filter matched nothing in this binary
    return std::nullopt;
  }
  fs::rename(partial, file);
  return file;
}

// A benchmark's name without Google Benchmark's suffixes.
std::string figure_name(const json& b) {
  std::string name = b["name"].get<std::string>();
  for (const char* drop : {"/manual_time", "/real_time"}) {
    if (size_t pos = name.find(drop); pos != std::string::npos) name.erase(pos);
  }
  if (size_t pos = name.find("/iterations:"); pos != std::string::npos) name.erase(pos);
  return name;
}

// The figures of one result file: a table row per figure with a same-run
// limit into `md`, a counters line per other figure into `other`; the
// former as plot points (their size unit into *unit).
std::vector<Point> summarize(const fs::path& file, std::ostream& md, std::ostream& other,
                             std::string* unit) {
  std::ifstream in(file);
  json doc = json::parse(in);
  std::vector<Point> points;
  for (const json& b : doc["benchmarks"]) {
    if (b.value("error_occurred", false) || !b.contains("name") || !b["name"].is_string()) continue;
    const std::string name = figure_name(b);
    if (!b.contains("GBps") || !b.contains("limit_GBps")) {
      // Figures with another same-run reference (e.g. partitioned vs one
      // variable): listed with their counters after the table.
      std::string counters;
      for (const auto& [key, value] : b.items()) {
        if (!value.is_number() || kStandardFields.count(key)) continue;
        counters += (counters.empty() ? "" : ", ") + key + " " + format_number(value.get<double>());
      }
      if (!counters.empty()) other << "- " << name << ": " << counters << "\n";
      continue;
    }
    const double gbps = b["GBps"].get<double>(), limit = b["limit_GBps"].get<double>();
    md << "| " << name << " | " << format_number(gbps) << " | " << format_number(limit) << " | "
       << format_number(limit > 0 ? gbps / limit : 0) << " |\n";
    points.push_back(parse_point(name, gbps, limit, unit));
  }
  return points;
}

// The table of every figure in `files` (--out/summary-<machine>.md) and,
// with gnuplot, the throughput plots of each file and the varstate vs
// PyTorch plots of the comparison files in --out. The PNGs drawn.
std::vector<fs::path> write_summary(const BenchOptions& o, const std::vector<fs::path>& files,
                                    const std::string& machine, const fs::path& table,
                                    bool have_gnuplot) {
  std::ofstream md(table);
  md << "| benchmark | GB/s | limit GB/s (same run) | ratio |\n|---|---:|---:|---:|\n";
  std::ostringstream other;
  std::vector<fs::path> pngs;
  for (const fs::path& file : files) {
    std::string unit;
    const std::vector<Point> points = summarize(file, md, other, &unit);
    if (!have_gnuplot) continue;
    for (const char* device : {"cpu", "gpu"}) {
      if (auto png = plot_throughput(file.parent_path(), file.stem().string(), device, points, unit,
                                     machine)) {
        pngs.push_back(*png);
      }
    }
  }
  if (other.tellp() > 0) md << "\nOther figures (counters as reported):\n\n" << other.str();
  md.close();
  if (have_gnuplot) {
    for (const auto& entry : fs::directory_iterator(o.out)) {
      const std::string fname = entry.path().filename().string();
      if (fname.find("-vs-torch") != std::string::npos && entry.path().extension() == ".json") {
        if (auto png = plot_torch(entry.path())) pngs.push_back(*png);
      }
    }
  }
  return pngs;
}

int bench(const BenchOptions& o) {
  try {
    std::regex check(o.filter, std::regex::extended);
  } catch (const std::regex_error& e) {
    throw InvalidArgumentError("--filter " + varstate::quoted(o.filter) +
                               " is not a regular expression (" + e.what() + ")");
  }
  ensure_writable_dir("--out", o.out);
  // Only the binaries with a benchmark the filter selects run; with none,
  // one line says so (not one complaint per binary).
  std::vector<std::pair<std::string, fs::path>> binaries = find_benchmarks();
  std::erase_if(binaries,
                [&](const auto& b) { return !has_matching_benchmark(o, b.first, b.second); });
  if (binaries.empty()) {
    throw NotFoundError("no benchmark matches --filter " + varstate::quoted(o.filter));
  }

  const std::string machine = machine_name();
  const std::string devices = devices_description();
  std::printf("varstate bench: machine %s; devices: %s; %s run\n", machine.c_str(), devices.c_str(),
              o.full ? "full" : "quick (--full for every size)");
  setenv("VARSTATE_BENCH_QUICK", o.full ? "0" : "1", 1);
  std::vector<fs::path> written;
  for (const auto& [name, exe] : binaries) {
    if (auto file = run_benchmark(o, name, exe, machine, devices)) written.push_back(*file);
  }
  if (written.empty())
    throw NotFoundError("no benchmark matches --filter " + varstate::quoted(o.filter));
  // The table and plots cover this machine's latest result of every binary,
  // including those an earlier run with another --filter wrote.
  const size_t ran = written.size();
  for (const char* name : kBenchmarks) {
    const fs::path file = result_file(o, name, machine);
    if (fs::exists(file) && std::find(written.begin(), written.end(), file) == written.end()) {
      written.push_back(file);
    }
  }

  const fs::path table = fs::path(o.out) / ("summary-" + machine + ".md");
  const bool have_gnuplot =
      o.plots && run_process({"sh", "-c", "command -v gnuplot >/dev/null"}) == 0;
  const std::vector<fs::path> pngs = write_summary(o, written, machine, table, have_gnuplot);
  std::printf("wrote %zu JSON file(s), %s", ran, table.c_str());
  for (const fs::path& p : pngs) std::printf(", %s", p.filename().c_str());
  std::printf("\n");
  if (o.plots && !have_gnuplot)
    std::fprintf(stderr, "varstate bench: gnuplot not found: no plots drawn\n");
  return 0;
}

}  // namespace

Action add_bench_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "bench", "run the benchmark suite: JSON, a table and PNG plots under --out");
  auto o = std::make_shared<BenchOptions>();
  cmd->add_option("--filter", o->filter, "run the benchmarks whose name matches this regex")
      ->capture_default_str();
  cmd->add_option("--out", o->out, "folder for the JSON results, table and plots")
      ->capture_default_str();
  cmd->add_flag("--full", o->full, "every size (minutes to an hour on a small CPU machine)");
  cmd->add_flag("!--no_plots", o->plots, "skip the gnuplot plots");
  return [o] { return bench(*o); };
}

}  // namespace varstate::cli
