/* The machine a C benchmark ran on (every benchmark prints it): the CPU model,
 * the cores online, the SIMD flags the kernels dispatch on, and the library's
 * build info. Header-only (static), for the C benchmarks of this folder. */
#ifndef DS_BENCH_MACHINE_H
#define DS_BENCH_MACHINE_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "deepspeed_c.h"

static void bench_print_cpu(void) {
    char line[1024], model[256] = "?", isa[256] = "";
    FILE* f = fopen("/proc/cpuinfo", "r");
    static const char* const flags[] = {" avx2", " fma", " avx512f", " avx512bw", " avx512_bf16", " amx_bf16", " f16c"};
    size_t i;
    if (f) {
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "model name", 10) && model[0] == '?') {
                const char* c = strchr(line, ':');
                if (c) snprintf(model, sizeof model, "%s", c + 2);
                model[strcspn(model, "\n")] = 0;
            }
            if (!strncmp(line, "flags", 5) && !isa[0]) {
                for (i = 0; i < sizeof flags / sizeof flags[0]; ++i) {
                    const char* p = strstr(line, flags[i]);
                    size_t n = strlen(flags[i]);
                    if (p && (p[n] == ' ' || p[n] == '\n')) strncat(isa, flags[i], sizeof isa - strlen(isa) - 1);
                }
            }
        }
        fclose(f);
    }
    printf("CPU: %s, %ld cores online; ISA:%s\n", model, sysconf(_SC_NPROCESSORS_ONLN),
           isa[0] ? isa : " (none of avx2/avx512)");
    printf("library: %s\n", ds_build_info());
}

#endif
