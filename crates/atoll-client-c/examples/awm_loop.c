/*
 * awm_loop: a reconfigurable application's loop in C (BarbequeRTRM's
 * execution loop over atoll's application calls). It registers with a
 * recipe, then for each cycle: polls its assignment and adapts (here it
 * only prints the threads it would run), waits while the daemon has it
 * wait, does one cycle of work, and reports its cycles against a goal every
 * few cycles. At the end it says done.
 *
 *     awm_loop [-s SOCKET] [-n CYCLES] [-r REPORT_EVERY] [-g GOAL_CPS]
 *              [-p POLL_MS] (-f RECIPE_FILE | RECIPE_NAME)
 *
 * RECIPE_NAME is a recipe of the platform description; -f sends the
 * recipe in the file (TOML, or JSON) along. Prints one line per assignment
 * and per report, then a summary; exits 0, or 1 on an error (on stderr),
 * or 2 on bad usage.
 *
 * Build (see clients/README.md):
 *     cargo build -p atoll-client-c
 *     cc -I crates/atoll-client-c/include awm_loop.c \
 *        -L target/debug -latoll_client -Wl,-rpath,$PWD/target/debug
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "atoll.h"

static int usage(void) {
    fprintf(stderr, "usage: awm_loop [-s SOCKET] [-n CYCLES] [-r REPORT_EVERY] "
                    "[-g GOAL_CPS] [-p POLL_MS] (-f RECIPE_FILE | RECIPE_NAME)\n");
    return 2;
}

/* The whole file in a new string (NULL on failure). */
static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = (char *)malloc(cap);
    size_t n;
    while (buf != NULL && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *bigger = (char *)realloc(buf, cap * 2);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf != NULL) {
        buf[len] = '\0';
    }
    return buf;
}

/* One cycle of work: some arithmetic per thread the grant allows. */
static void work(unsigned int threads) {
    volatile uint64_t x = 88172645463325252ULL;
    for (unsigned int t = 0; t < threads; t++) {
        for (int i = 0; i < 100000; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    }
}

static void pause_ms(unsigned int ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Prints the assignment the handle holds. */
static void print_assignment(atoll_client *c, const char *when) {
    if (atoll_app_state(c) == ATOLL_APP_RUNNING) {
        printf("%s: generation %" PRIu64 ": mode %d (%s) on island %s, %.2f CPUs on %s, "
               "%u threads\n",
               when, atoll_app_generation(c), atoll_app_mode(c), atoll_app_mode_name(c),
               atoll_app_island(c), atoll_app_cpu_quota(c), atoll_app_cpus(c),
               atoll_app_parallelism(c));
    } else {
        printf("%s: generation %" PRIu64 ": waiting: %s\n", when, atoll_app_generation(c),
               atoll_app_reason(c));
    }
}

static int fail(atoll_client *c, const char *what, int rc) {
    fprintf(stderr, "awm_loop: %s: error %d: %s\n", what, rc, atoll_last_message(c));
    atoll_close(c);
    return 1;
}

int main(int argc, char **argv) {
    const char *socket_path = NULL; /* NULL: ATOLL_DEFAULT_SOCKET */
    const char *recipe_file = NULL;
    unsigned long cycles = 10, report_every = 5, poll_ms = 100;
    double goal = 0.0;
    int i = 1;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        const char *v = argv[i + 1];
        char *end = NULL;
        if (strcmp(argv[i], "-s") == 0) {
            socket_path = v;
            continue;
        }
        if (strcmp(argv[i], "-f") == 0) {
            recipe_file = v;
            continue;
        }
        if (strcmp(argv[i], "-g") == 0) {
            goal = strtod(v, &end);
        } else if (strcmp(argv[i], "-n") == 0) {
            cycles = strtoul(v, &end, 10);
        } else if (strcmp(argv[i], "-r") == 0) {
            report_every = strtoul(v, &end, 10);
        } else if (strcmp(argv[i], "-p") == 0) {
            poll_ms = strtoul(v, &end, 10);
        } else {
            return usage();
        }
        if (end == v || *end != '\0') {
            return usage();
        }
    }
    if (cycles == 0 || report_every == 0 || goal < 0.0 ||
        (recipe_file != NULL ? i != argc : i + 1 != argc)) {
        return usage();
    }

    atoll_client *c = atoll_connect(socket_path);
    if (c == NULL) {
        fprintf(stderr, "awm_loop: %s\n", atoll_last_message(NULL));
        return 1;
    }
    uint64_t app = 0;
    int rc;
    if (recipe_file != NULL) {
        char *text = read_file(recipe_file);
        if (text == NULL) {
            fprintf(stderr, "awm_loop: cannot read %s\n", recipe_file);
            atoll_close(c);
            return 1;
        }
        rc = atoll_app_register_recipe(c, text, 0, &app);
        free(text);
    } else {
        rc = atoll_app_register(c, argv[i], 0, &app);
    }
    if (rc != ATOLL_ACK) {
        return fail(c, "register", rc);
    }
    printf("registered app %" PRIu64 "\n", app);
    print_assignment(c, "start");

    uint64_t generation = atoll_app_generation(c);
    unsigned long changes = 0, suspensions = 0;
    char when[64];
    for (unsigned long cycle = 1; cycle <= cycles; cycle++) {
        snprintf(when, sizeof when, "cycle %lu", cycle);
        rc = atoll_app_poll(c, app, generation);
        /* Work only while running. While waiting (also before the first
         * planning run, which the daemon does after registering), poll
         * until running again. */
        for (;;) {
            if (rc < 0) {
                return fail(c, "poll", rc);
            }
            if (rc == ATOLL_CHANGED) {
                generation = atoll_app_generation(c);
                changes++;
                print_assignment(c, when);
                if (atoll_app_state(c) != ATOLL_APP_RUNNING) {
                    suspensions++;
                }
            }
            if (atoll_app_state(c) == ATOLL_APP_RUNNING) {
                break;
            }
            pause_ms((unsigned int)poll_ms);
            rc = atoll_app_poll(c, app, generation);
        }
        work(atoll_app_parallelism(c));
        if (cycle % report_every == 0 || cycle == cycles) {
            double gap = 0.0;
            rc = atoll_app_report(c, app, (uint64_t)cycle, goal, &gap);
            if (rc != ATOLL_ACK) {
                return fail(c, "report", rc);
            }
            printf("reported %lu cycles: goal gap %.2f\n", cycle, gap);
        }
    }
    rc = atoll_app_done(c, app);
    if (rc != ATOLL_ACK) {
        return fail(c, "done", rc);
    }
    printf("done: %lu cycles, %lu changes, %lu suspensions\n", cycles, changes, suspensions);
    atoll_close(c);
    return 0;
}
