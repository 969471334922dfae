#include "planner/tuner.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <vector>

#include "core.h"
#include "tuning_knobs.h"

namespace jsvd {
namespace cuda {
namespace {

// Bump when a kernel change makes old measurements stale: files of another
// version are ignored and rewritten.
constexpr const char* kTunerVersion = "torch_jsvd-tuner-2";
// The GEMM level's candidate widths (levels/gemm/gemm_level.h: pairs of at most 64 columns).
constexpr int64_t kWidths[] = {32, 16};
// Sweeps a random matrix takes (docs/kernel-notes.md: 10-14 from 512 to 4096
// columns at either level): the prediction is fixed cost + kSweeps sweeps.
constexpr double kSweeps = 12;

thread_local const TunedLevel* g_override = nullptr;

using Key = std::tuple<int64_t, int64_t, int64_t, size_t, bool>;  // batch, p, q, elem, uv

struct DeviceCache {
  bool loaded = false;
  std::string path;
  std::map<Key, TunedLevel> entries;
};

std::mutex g_mu;
std::map<int, DeviceCache> g_cache;

std::string cache_dir() {
  if (const char* d = std::getenv("JSVD_CACHE_DIR")) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/torch_jsvd";
  if (const char* h = std::getenv("HOME")) return std::string(h) + "/.cache/torch_jsvd";
  return "";
}

std::string device_name(int device) {
  std::string s = at::cuda::getDeviceProperties(device)->name;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// File: a header line "<version> <device>", then one line per shape:
// batch p q elem uv gemm width why... Anything else: the file is ignored.
// Reads `path` into `read`; false (and `read` untouched) if absent, stale or corrupt (said once, `warn`).
bool read_entries(const std::string& path, int device, std::map<Key, TunedLevel>& read, bool warn) {
  std::ifstream in(path);
  if (!in) return false;  // (absent: calibrate)
  std::string line;
  std::map<Key, TunedLevel> got;
  if (!std::getline(in, line) || line != std::string(kTunerVersion) + " " + device_name(device)) return false;  // stale
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    int64_t b, p, q, w;
    size_t e;
    int uv, gemm;
    if (!(ls >> b >> p >> q >> e >> uv >> gemm >> w) || b < 1 || p < 1 || q < 1 || (e != 4 && e != 8) ||
        (gemm != 0 && gemm != 1) || (gemm && w != kWidths[0] && w != kWidths[1])) {
      if (warn) TORCH_WARN("torch_jsvd: ignoring the corrupt tuner cache ", path, " (it will be rewritten)");
      return false;
    }
    TunedLevel t{true, gemm != 0, w, ""};
    std::getline(ls >> std::ws, t.why);
    for (char& ch : t.why)
      if (ch == '"' || ch == '\\' || static_cast<unsigned char>(ch) < 32) ch = ' ';  // (plan() prints it in JSON)
    t.why = "cache: " + t.why;
    got[Key{b, p, q, e, uv != 0}] = t;
  }
  read = std::move(got);
  return true;
}

// Entries on disk that this process does not have yet (another process's calibrations) join it; its
// own stay as they are.
void merge_from_disk(DeviceCache& dc, int device, bool warn = false) {
  std::map<Key, TunedLevel> disk;
  if (!dc.path.empty() && read_entries(dc.path, device, disk, warn)) dc.entries.insert(disk.begin(), disk.end());
}

void load(DeviceCache& dc, int device) {
  dc.loaded = true;
  const std::string dir = cache_dir();
  if (dir.empty()) return;
  dc.path = dir + "/tuner-" + device_name(device) + ".txt";
  merge_from_disk(dc, device, /*warn=*/true);
}

// Processes that share the cache (data-parallel ranks, test workers) serialise their updates on a lock
// file, each merging what is on disk before it writes, so that none drops another's entries; the file is
// rewritten whole, through a temporary file and a rename (no torn file for a reader). Failures only cost
// the next process a calibration.
void save(DeviceCache& dc, int device) {
  if (dc.path.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(cache_dir(), ec);
  if (ec) return;
  const int lock = ::open((dc.path + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock >= 0) ::flock(lock, LOCK_EX);  // (without it: the rename alone, as before)
  merge_from_disk(dc, device);
  const std::string tmp = dc.path + ".tmp" + std::to_string(::getpid());
  bool written = false;
  {
    std::ofstream out(tmp);
    if (out) {
      out << kTunerVersion << " " << device_name(device) << "\n";
      for (const auto& kv : dc.entries) {
        const Key& k = kv.first;
        const std::string why = kv.second.why.rfind("cache: ", 0) == 0 ? kv.second.why.substr(7) : kv.second.why;
        out << std::get<0>(k) << " " << std::get<1>(k) << " " << std::get<2>(k) << " " << std::get<3>(k) << " "
            << std::get<4>(k) << " " << kv.second.gemm << " " << kv.second.width << " " << why << "\n";
      }
      written = static_cast<bool>(out);
    }
  }
  if (written) std::filesystem::rename(tmp, dc.path, ec);
  if (!written || ec) std::filesystem::remove(tmp, ec);
  if (lock >= 0) ::close(lock);  // (releases the lock)
}

// Predicted ms of `batch` matrices under `cand`: one and three sweeps of a
// seeded Gaussian batch (the engine runs exactly max_sweeps without a host
// read, like svd_ex), timed with events after a warm-up. Returns < 0 when
// the warm-up alone exceeds `bound` (the candidate cannot win).
double predict(const TunedLevel& cand, const at::Tensor& A, int64_t nb, int64_t p, int64_t q, bool uv,
               double scale, double bound) {
  const PackedBatch b = PackedBatch::uniform_of(nb, p, q, false);
  SvdOptions o;
  o.compute_uv = uv;
  struct Override {  // the candidate, for the engine's planner, while this runs
    explicit Override(const TunedLevel* c) { g_override = c; }
    ~Override() { g_override = nullptr; }
  } set(&cand);
  auto timed = [&](int64_t sweeps) {
    o.max_sweeps = sweeps;
    const at::Tensor X = A.clone();  // (the engine overwrites its input)
    at::cuda::CUDAEvent start(cudaEventDefault), end(cudaEventDefault);
    start.record();
    jacobi_svd_cuda(X, b, o);
    end.record();
    end.synchronize();
    return static_cast<double>(start.elapsed_time(end));
  };
  if (timed(1) * scale >= bound) return -1;  // (the warm-up)
  const double t1 = timed(1), t3 = timed(3);
  const double per = std::max(0.0, (t3 - t1) / 2), fixed = std::max(0.0, t1 - per);
  return (fixed + kSweeps * per) * scale;
}

TunedLevel calibrate(int64_t batch, int64_t p, int64_t q, size_t elem, bool uv, int device) {
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  // At most 64 Mi elements are timed; a larger batch is predicted linearly.
  const int64_t nb = std::max<int64_t>(1, std::min<int64_t>(batch, (int64_t{64} << 20) / (p * q)));
  const double scale = static_cast<double>(batch) / static_cast<double>(nb);
  // A private generator: calibration leaves torch's random state alone.
  at::Generator gen = at::cuda::detail::createCUDAGenerator(static_cast<c10::DeviceIndex>(device));
  gen.set_current_seed(0);
  const auto opts = at::TensorOptions().device(at::kCUDA, device).dtype(elem == 8 ? at::kDouble : at::kFloat);
  const at::Tensor A = at::randn({nb * p * q}, gen, opts);
  std::vector<TunedLevel> cands;
  for (int64_t w : kWidths) cands.push_back(TunedLevel{true, true, w, ""});
  cands.push_back(TunedLevel{true, false, 0, ""});
  std::ostringstream why;
  why << "calibrated:";
  double best = 1e300;
  TunedLevel choice = cands.back();
  for (const TunedLevel& c : cands) {
    const double ms = predict(c, A, nb, p, q, uv, scale, best);
    why << " " << (c.gemm ? "gemm_w" + std::to_string(c.width) : std::string("block_pairs")) << "="
        << (ms < 0 ? std::string("slower") : std::to_string(static_cast<int64_t>(ms + 0.5)) + "ms");
    if (ms >= 0 && ms < best) {
      best = ms;
      choice = c;
    }
  }
  why << " (predicted for " << kSweeps << " sweeps)";
  choice.why = why.str();
  return choice;
}

}  // namespace

bool tuner_decides(int64_t q) {
  return knobs().tuner && knobs().level == 0 && q >= knobs().tuner_min_cols;
}

const TunedLevel* tuner_override() { return g_override; }

TunedLevel tuned_level(int64_t batch, int64_t p, int64_t q, size_t elem, bool compute_uv, int device,
                       bool may_calibrate) {
  const Key key{batch, p, q, elem, compute_uv};
  std::lock_guard<std::mutex> lock(g_mu);  // (one calibration at a time)
  DeviceCache& dc = g_cache[device];
  if (!dc.loaded) load(dc, device);
  auto it = dc.entries.find(key);
  if (it != dc.entries.end()) return it->second;
  merge_from_disk(dc, device);  // (another process may have calibrated it since: take its choice)
  it = dc.entries.find(key);
  if (it != dc.entries.end()) return it->second;
  if (!may_calibrate || c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) {
    return TunedLevel{false, false, 0, "not calibrated (planner's rule: the GEMM level from JSVD_GEMM_MIN_COLS columns)"};
  }
  TunedLevel t = calibrate(batch, p, q, elem, compute_uv, device);
  dc.entries[key] = t;
  save(dc, device);
  return t;
}

}  // namespace cuda
}  // namespace jsvd
