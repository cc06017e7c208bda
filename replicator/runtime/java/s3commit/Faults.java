package replicator.s3commit;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Map;

/**
 * Test-only fault injection inside the driver JVM, the twin of {@code replicator/faults.py} for
 * instants the Python side cannot reach: {@code REPLICATOR_FAULT=before_commit_put:N} stops (with
 * {@code REPLICATOR_FAULT_ACTION=stop}) or kills the process group right before the N-th fenced
 * commit PUT, after its fence and pin checks passed: the window a paused holder's late commit
 * comes from. Unset (production): one map lookup that finds nothing.
 */
final class Faults {
    private static final Map<String, Integer> PLAN = parse(System.getenv("REPLICATOR_FAULT"));
    private static final Map<String, Integer> HITS = new HashMap<>();

    private Faults() {
    }

    private static Map<String, Integer> parse(String spec) {
        Map<String, Integer> plan = new HashMap<>();
        if (spec == null) {
            return plan;
        }
        for (String part : spec.split(",")) {
            String[] fields = part.trim().split(":");
            if (fields.length >= 2) {
                try {
                    plan.put(fields[0], Integer.parseInt(fields[1]));
                } catch (NumberFormatException e) {
                    // replicator/faults.py refuses a malformed spec before the JVM starts
                }
            }
        }
        return plan;
    }

    /** Stop or kill the process group here if the plan names this pass of {@code point}. */
    static void point(String point) throws IOException {
        Integer planned = PLAN.get(point);
        if (planned == null) {
            return;
        }
        int hit;
        synchronized (HITS) {
            hit = HITS.merge(point, 1, Integer::sum);
        }
        if (hit != planned) {
            return;
        }
        boolean stop = "stop".equals(System.getenv("REPLICATOR_FAULT_ACTION"));
        System.err.println("replicator: injected fault " + point + ": " + (stop ? "stopping" : "crashing"));
        System.err.flush();
        String stat = new String(Files.readAllBytes(Paths.get("/proc/self/stat")), StandardCharsets.US_ASCII);
        String group = stat.substring(stat.lastIndexOf(')') + 2).split(" ")[2];
        try {
            // Returns once resumed (SIGCONT): the kill process is stopped with its group.
            new ProcessBuilder("kill", stop ? "-STOP" : "-KILL", "--", "-" + group).inheritIO().start().waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
