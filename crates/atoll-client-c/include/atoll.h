/*
 * atoll.h - C client library of atoll (protocol version 1).
 *
 * Applications use it to coordinate with atoll's islands (inTune): tune or
 * boost their units, borrow and release CPUs, and report the value of their
 * overlay's property (latency, throughput) so that the overlay's policy can
 * act on it; and, as reconfigurable applications (BarbequeRTRM), to
 * register with a recipe of working modes, learn the working mode and
 * resources assigned, follow suspensions, and report cycles against a goal
 * (the atoll_app_* functions below). Link with -latoll_client
 * (libatoll_client.so, soname libatoll_client.so.0, or libatoll_client.a,
 * built by `cargo build -p atoll-client-c`); installed (the .deb, or
 * crates/atoll-client-c/install.sh), `pkg-config --cflags --libs atoll`
 * gives the flags.
 *
 *     atoll_client *c = atoll_connect(NULL);
 *     if (!c) { fprintf(stderr, "%s\n", atoll_last_message(NULL)); return 1; }
 *     int rc = atoll_report(c, "shop", 1234.5);
 *     printf("%d: %s\n", rc, atoll_last_message(c));
 *     atoll_close(c);
 *
 * Every call returns ATOLL_ACK (0) on an ack or success, ATOLL_NACK (1) when
 * the coordinator refused, ATOLL_NOT_HOLDING (2) when a report's property
 * does not hold, ATOLL_CHANGED (3) when an application's poll brings a new
 * assignment, or a negative ATOLL_E* code (the accessors atoll_app_id ...
 * atoll_app_memory_bytes return values instead). atoll_last_message() has the
 * text in every case. A handle is one connection; use it from one thread at
 * a time. Names (overlays, units, islands) are ASCII letters, digits, '_'
 * and '-', starting with a letter or digit, at most 64 bytes.
 */
#ifndef ATOLL_H
#define ATOLL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The socket atoll_connect(NULL) connects to. */
#define ATOLL_DEFAULT_SOCKET "/run/atoll/atoll.sock"

/* The version of atoll this header belongs to (the crate's version; the
 * soname's number is the major). atoll_version() says which library was
 * loaded. */
#define ATOLL_VERSION_MAJOR 0
#define ATOLL_VERSION_MINOR 1
#define ATOLL_VERSION_PATCH 0
#define ATOLL_VERSION_STRING "0.1.0"

/* Return codes. */
enum atoll_status {
    ATOLL_ACK = 0,                   /* acknowledged / succeeded */
    ATOLL_NACK = 1,                  /* refused; reason in atoll_last_message */
    ATOLL_NOT_HOLDING = 2,           /* report recorded; property does not hold */
    ATOLL_CHANGED = 3,               /* app poll: the assignment changed */
    ATOLL_EINVAL = -1,               /* bad argument (NULL, name, enum, NaN, JSON) */
    ATOLL_EIO = -2,                  /* connection failed or closed, garbled reply */
    ATOLL_ETIMEOUT = -3,             /* no answer in time */
    ATOLL_EPROTOCOL = -4,            /* reply of the wrong kind */
    ATOLL_EBAD_REQUEST = -10,        /* daemon error: bad_request */
    ATOLL_EUNSUPPORTED_VERSION = -11,/* daemon error: unsupported_version */
    ATOLL_EPERMISSION_DENIED = -12,  /* daemon error: permission_denied */
    ATOLL_ENOT_FOUND = -13,          /* daemon error: not_found */
    ATOLL_EBACKEND = -14,            /* daemon error: backend */
    ATOLL_ESHUTTING_DOWN = -15,      /* daemon error: shutting_down */
    ATOLL_EBUSY = -16                /* daemon error: busy (try again later) */
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

/* What atoll_app_state says. */
enum atoll_app_state {
    ATOLL_APP_NONE = 0,    /* no assignment received yet */
    ATOLL_APP_WAITING = 1, /* suspended until a running assignment */
    ATOLL_APP_RUNNING = 2  /* running in a working mode */
};

/* The `after` of atoll_app_poll before acting on any generation. */
#define ATOLL_NO_GENERATION UINT64_MAX

/* One connection to the daemon. */
typedef struct atoll_client atoll_client;

/* The version of the library loaded, "MAJOR.MINOR.PATCH" (static). */
const char *atoll_version(void);

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

/*
 * Reconfigurable applications. An application registers with a recipe of
 * working modes, then polls for its assignment: running in a working mode
 * (adapt: e.g. run atoll_app_parallelism(c) threads) or waiting (stop
 * working until the next running assignment). Every assignment has a
 * generation that grows with every change; poll with the generation last
 * acted on. Report the cycles done (a counter) and the goal in cycles per
 * second now and then; the daemon plans again when the goal gap is not 0.
 * Finally say done. See examples/awm_loop.c.
 *
 * The handle keeps the last assignment it received (register or poll);
 * the atoll_app_id ... atoll_app_memory_bytes accessors read it (0, -1 or
 * "" before any, or for fields of a running state while waiting). Their
 * strings live until the next call on c that receives an assignment.
 * atoll_last_message says the assignment in words, with the reason when
 * waiting.
 */

/* Registers process pid (0: the caller) with the recipe recipe_name of the
 * platform description; stores the application's id in *app. */
int atoll_app_register(atoll_client *c, const char *recipe_name,
                       unsigned int pid, uint64_t *app);

/* As atoll_app_register, with the recipe sent along as TOML text (name,
 * priority, [[modes]] tables) or JSON text (starting with '{'). A recipe
 * that does not parse or is invalid is ATOLL_EINVAL, with the line, field
 * and value in atoll_last_message. */
int atoll_app_register_recipe(atoll_client *c, const char *recipe_text,
                              unsigned int pid, uint64_t *app);

/* Asks for app's assignment. after: the generation last acted on
 * (ATOLL_NO_GENERATION: none). ATOLL_CHANGED if the generation differs
 * from after, ATOLL_ACK if not. */
int atoll_app_poll(atoll_client *c, uint64_t app, uint64_t after);

/* Reports app's progress: cycles done since it registered (a counter) and
 * its goal in cycles per second (0: no goal). The daemon's goal gap (goal /
 * rate - 1; 0 without a goal) goes to *goal_gap (NULL: dropped). */
int atoll_app_report(atoll_client *c, uint64_t app, uint64_t cycles,
                     double goal_cps, double *goal_gap);

/* app is done: its resources go back. */
int atoll_app_done(atoll_client *c, uint64_t app);

/* Every application as a JSON array in a new string *out (NULL on
 * failure); free it with atoll_free_string. */
int atoll_apps_json(atoll_client *c, char **out);

/* The application and generation of the last assignment (0: none). */
uint64_t atoll_app_id(const atoll_client *c);
uint64_t atoll_app_generation(const atoll_client *c);

/* ATOLL_APP_NONE, ATOLL_APP_WAITING or ATOLL_APP_RUNNING. */
int atoll_app_state(const atoll_client *c);

/* While waiting: why, in words (else ""). */
const char *atoll_app_reason(const atoll_client *c);

/* While running: the working mode's id (else -1) and name (else ""). */
int atoll_app_mode(const atoll_client *c);
const char *atoll_app_mode_name(const atoll_client *c);

/* While running: the island, and the CPUs it may run on as a list such as
 * "4-7" (else ""). */
const char *atoll_app_island(const atoll_client *c);
const char *atoll_app_cpus(const atoll_client *c);

/* While running: CPUs' worth of time it may use (else 0). */
double atoll_app_cpu_quota(const atoll_client *c);

/* While running: the threads the working mode asks for (0 if it does not
 * say), and how many threads to run: those, else the quota rounded up, at
 * least 1 (0 unless running). */
unsigned int atoll_app_threads(const atoll_client *c);
unsigned int atoll_app_parallelism(const atoll_client *c);

/* While running: memory it may use, bytes (0: no reservation). */
uint64_t atoll_app_memory_bytes(const atoll_client *c);

#ifdef __cplusplus
}
#endif

#endif /* ATOLL_H */
