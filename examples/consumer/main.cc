// Uses varstate through its installed headers and CMake package.
#include <varstate/varstate.h>

#include <cstdio>

int main() {
  using namespace varstate;
  Tensor w({{1.f, 2.f}, {3.f, 4.f}});
  assign_add(w, 1);
  std::printf("devices: %s\nw + 1 =\n%s\n", DeviceManager::instance().device_list().c_str(),
              w.to_string().c_str());
  return w.to_vector<float>()[3] == 5.f ? 0 : 1;
}
