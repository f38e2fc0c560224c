/*
 * report_latency: reports one latency value of an overlay to the atoll
 * daemon (the proactive policy of inTune: the application measures, the
 * overlay's policy acts) and prints the answer.
 *
 *     report_latency [-s SOCKET] OVERLAY MICROSECONDS
 *
 * Prints "holds: ..." or "does not hold: ..." (with what the overlay's
 * policy did about it) and exits 0; on an error prints it to stderr and
 * exits 1; on bad usage exits 2.
 *
 * Build (see clients/README.md):
 *     cargo build -p atoll-client-c
 *     cc -I crates/atoll-client-c/include report_latency.c \
 *        -L target/debug -latoll_client -Wl,-rpath,$PWD/target/debug
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atoll.h"

static int usage(void) {
    fprintf(stderr, "usage: report_latency [-s SOCKET] OVERLAY MICROSECONDS\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *socket_path = NULL; /* NULL: ATOLL_DEFAULT_SOCKET */
    int i = 1;
    if (argc > 2 && strcmp(argv[1], "-s") == 0) {
        socket_path = argv[2];
        i = 3;
    }
    if (argc - i != 2) {
        return usage();
    }
    const char *overlay = argv[i];
    char *end = NULL;
    double value = strtod(argv[i + 1], &end);
    if (end == argv[i + 1] || *end != '\0') {
        return usage();
    }

    atoll_client *c = atoll_connect(socket_path);
    if (c == NULL) {
        fprintf(stderr, "report_latency: %s\n", atoll_last_message(NULL));
        return 1;
    }
    int rc = atoll_report(c, overlay, value);
    int status = 0;
    switch (rc) {
    case ATOLL_ACK:
        printf("holds: %s\n", atoll_last_message(c));
        break;
    case ATOLL_NOT_HOLDING:
        printf("does not hold: %s\n", atoll_last_message(c));
        break;
    default:
        fprintf(stderr, "report_latency: error %d: %s\n", rc, atoll_last_message(c));
        status = 1;
        break;
    }
    atoll_close(c);
    return status;
}
