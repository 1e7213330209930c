/* Host test of urgent.c's scoring: cc test.c -o test && ./test */
#include <stdio.h>
#include <string.h>

#include "urgent.c"

static int failures;

static void check(const char *request, const char *expected) {
    char out[256];
    long n = weight(request, (long)strlen(request), out, sizeof out);
    const char *got = n < 0 ? "(error)" : (out[n] = 0, out);
    if (strcmp(got, expected) != 0) {
        printf("FAIL %s\n  got      %s\n  expected %s\n", request, got, expected);
        failures++;
    }
}

int main(void) {
    check("{\"workloads\": [], \"now\": 0}", "{\"scores\":[]}");
    check("{\"now\": 3, \"workloads\": [{\"name\": \"a\", \"labels\": {\"urgent\": \"true\"}},"
          " {\"name\": \"b\", \"labels\": {\"urgent\": \"false\", \"team\": \"x\"}},"
          " {\"name\": \"c\"}, {\"labels\": {}, \"podSets\": [{\"labels\": {\"urgent\": \"true\"}}]},"
          " {\"annotations\": {\"urgent\": \"true\"}, \"labels\": {\"a\": [1, {\"b\": \"]}\"}], \"urgent\": \"true\"}}],"
          " \"params\": null}",
          "{\"scores\":[1,0,0,0,1]}");
    check("{\"workloads\": [{\"labels\": {\"urgent\": true}}]}", "{\"scores\":[0]}");
    check("{\"workloads\": [{\"labels\": {\"urgent\": \"true\"}}", "(error)");
    check("{\"workloads\": {}}", "(error)");
    check("{\"queues\": {}}", "(error)");
    check("not json", "(error)");
    if (failures == 0)
        printf("urgent.c: all tests passed\n");
    return failures != 0;
}
