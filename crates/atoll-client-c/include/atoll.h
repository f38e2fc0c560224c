/*
 * atoll.h - C client library of atoll (protocol version 1).
 *
 * Applications use it to coordinate with atoll's islands (inTune): tune or
 * boost their units, borrow and release CPUs, and report the value of their
 * overlay's property (latency, throughput) so that the overlay's policy can
 * act on it. Link with -latoll_client (libatoll_client.so or .a, built by
 * `cargo build -p atoll-client-c`).
 *
 *     atoll_client *c = atoll_connect(NULL);
 *     if (!c) { fprintf(stderr, "%s\n", atoll_last_message(NULL)); return 1; }
 *     int rc = atoll_report(c, "shop", 1234.5);
 *     printf("%d: %s\n", rc, atoll_last_message(c));
 *     atoll_close(c);
 *
 * Every call returns ATOLL_ACK (0) on an ack or success, ATOLL_NACK (1) when
 * the coordinator refused, ATOLL_NOT_HOLDING (2) when a report's property
 * does not hold, or a negative ATOLL_E* code. atoll_last_message() has the
 * text in every case. A handle is one connection; use it from one thread at
 * a time. Names (overlays, units, islands) are ASCII letters, digits, '_'
 * and '-', starting with a letter or digit, at most 64 bytes.
 */
#ifndef ATOLL_H
#define ATOLL_H

#ifdef __cplusplus
extern "C" {
#endif

/* The socket atoll_connect(NULL) connects to. */
#define ATOLL_DEFAULT_SOCKET "/run/atoll/atoll.sock"

/* Return codes. */
enum atoll_status {
    ATOLL_ACK = 0,                   /* acknowledged / succeeded */
    ATOLL_NACK = 1,                  /* refused; reason in atoll_last_message */
    ATOLL_NOT_HOLDING = 2,           /* report recorded; property does not hold */
    ATOLL_EINVAL = -1,               /* bad argument (NULL, name, enum, NaN, JSON) */
    ATOLL_EIO = -2,                  /* connection failed or closed, garbled reply */
    ATOLL_ETIMEOUT = -3,             /* no answer in time */
    ATOLL_EPROTOCOL = -4,            /* reply of the wrong kind */
    ATOLL_EBAD_REQUEST = -10,        /* daemon error: bad_request */
    ATOLL_EUNSUPPORTED_VERSION = -11,/* daemon error: unsupported_version */
    ATOLL_EPERMISSION_DENIED = -12,  /* daemon error: permission_denied */
    ATOLL_ENOT_FOUND = -13,          /* daemon error: not_found */
    ATOLL_EBACKEND = -14,            /* daemon error: backend */
    ATOLL_ESHUTTING_DOWN = -15       /* daemon error: shutting_down */
};

/* The `resource` argument of atoll_tune. */
enum atoll_resource {
    ATOLL_CORES = 0,    /* whole CPUs (borrowed, not tuned) */
    ATOLL_CPU_TIME = 1, /* CPU time inside the unit's island */
    ATOLL_MEMORY = 2    /* the unit's memory limit */
};

/* The `dir` argument of atoll_tune. */
enum atoll_dir {
    ATOLL_UP = 0,
    ATOLL_DOWN = 1
};

/* One connection to the daemon. */
typedef struct atoll_client atoll_client;

/* Connects to socket_path (NULL: ATOLL_DEFAULT_SOCKET). NULL on failure,
 * with the reason in atoll_last_message(NULL). */
atoll_client *atoll_connect(const char *socket_path);

/* Closes the connection and frees c (NULL: nothing). */
void atoll_close(atoll_client *c);

/* Text of the last answer on c (effects, nack reason, error); for c NULL,
 * of the last call on this thread without a handle (a failed connect).
 * Never NULL; valid until the next call with the same handle. */
const char *atoll_last_message(const atoll_client *c);

/* How long each call waits for the daemon, ms (0: forever; default 30 s). */
int atoll_set_timeout_ms(atoll_client *c, unsigned int ms);

/* Tunes unit's share of resource one step up or down, for overlay. */
int atoll_tune(atoll_client *c, const char *overlay, const char *unit,
               int resource, int dir);

/* Boosts unit's CPU time at once, for a bounded time, for overlay. */
int atoll_trigger(atoll_client *c, const char *overlay, const char *unit);

/* Borrows up to amount CPUs for overlay from island from_island (NULL: any
 * island that can lend) into island into (NULL: the island of the
 * overlay's first unit). */
int atoll_borrow(atoll_client *c, const char *overlay, unsigned int amount,
                 const char *from_island, const char *into);

/* Gives back to island lender the CPUs island into (NULL: the island of
 * the overlay's first unit) borrowed from it for overlay. */
int atoll_release(atoll_client *c, const char *overlay, const char *lender,
                  const char *into);

/* Sends any coordination message as JSON, e.g.
 * {"msg":"deregister","overlay":"shop"}, from island from (NULL: default). */
int atoll_coordinate_json(atoll_client *c, const char *message_json,
                          const char *from);

/* Reports the current value of overlay's property (latency in us, or
 * operations per second): ATOLL_ACK if it holds, ATOLL_NOT_HOLDING if not;
 * what the overlay's policy did is in atoll_last_message. */
int atoll_report(atoll_client *c, const char *overlay, double value);

/* The overlays as a JSON array in a new string *out (NULL on failure);
 * free it with atoll_free_string. */
int atoll_overlays_json(atoll_client *c, char **out);

/* Frees a string returned by this library (NULL: nothing). */
void atoll_free_string(char *s);

#ifdef __cplusplus
}
#endif

#endif /* ATOLL_H */
