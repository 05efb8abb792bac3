// A C++ program outside the project, built against the installed tree:
// include/deepspeed_c.hpp must be installed beside deepspeed_c.h and work
// from there (it includes nothing but the public C header and the standard
// library).
#include <cstdio>
#include <deepspeed_c.hpp>

int main() {
    try {
        ds::check_abi();
        ds::Engine e("{\"train_batch_size\": 4}");
        if (e.world_size() != 1) return 1;
        try {
            ds::Engine bad("{\"train_batch_size\": 4, \"no_such_key\": 1}");
            return 1;
        } catch (const ds::Error& err) {
            if (err.status() != ds::Status::invalid_config) return 1;
        }
        std::printf("consumer_cpp: deepspeed_c %s\n", std::string(ds::version_string()).c_str());
        return 0;
    } catch (const ds::Error& err) {
        std::printf("consumer_cpp failed: %s\n", err.what());
        return 1;
    }
}
