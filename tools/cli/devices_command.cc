// `varstate devices`: the devices this process finds.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "commands.h"
#include "varstate/device_manager.h"

namespace varstate::cli {

namespace {

int devices() {
  auto& dm = DeviceManager::instance();
  std::printf("%-16s %-44s %12s  %s\n", "device", "model", "memory", "compute capability");
  for (Device* d : dm.devices()) {
    double gib = static_cast<double>(d->total_memory()) / (1u << 30);
    std::string cc = d->is_gpu() ? std::to_string(d->compute_capability() / 10) + "." +
                                       std::to_string(d->compute_capability() % 10)
                                 : "-";
    if (d->emulated()) cc += " (emulated)";
    std::printf("%-16s %-44.44s %8.1f GiB  %s\n", d->name().c_str(), d->model().c_str(), gib,
                cc.c_str());
  }
  std::printf("%d GPU(s)%s\n", dm.num_gpus(),
#ifdef VARSTATE_HAVE_CUDA
              dm.num_gpus() == 0 ? " (CUDA build; no usable GPU or driver found)"
              : dm.gpu(0).emulated()
                  ? " emulated on the CPU (VARSTATE_EMULATED_GPUS: correctness only, no GPU speed)"
                  : ""
#else
              " (CPU-only build)"
#endif
  );
  return 0;
}

}  // namespace

Action add_devices_command(CLI::App& app) {
  app.add_subcommand("devices", "list the CPU and GPUs varstate finds");
  return devices;
}

}  // namespace varstate::cli
