/* A program outside the project, built against the installed tree. */
#include <stdio.h>
#include <deepspeed_c.h>

int main(void) {
    ds_engine_t* e = NULL;
    int32_t world = 0;
    if (ds_version() != DS_VERSION_NUMBER) return 1;
    if (ds_engine_create("{\"train_batch_size\": 4}", NULL, &e) != DS_OK) {
        printf("create failed: %s\n", ds_last_error());
        return 1;
    }
    if (ds_engine_world_size(e, &world) != DS_OK || world != 1) return 1;
    ds_engine_destroy(e);
    printf("consumer: deepspeed_c %s\n", ds_version_string());
    return 0;
}
