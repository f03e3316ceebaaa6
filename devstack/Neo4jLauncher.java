// Runs Neo4j Community embedded, with the Bolt connector on, for the local
// stack (see devstack/neo4j.py and docs/adr/0001-local-stack-without-docker.md).
//
// Usage: java -cp <neo4j classpath>:<dir> Neo4jLauncher HOME_DIR BOLT_PORT PASSWORD_FILE PAGECACHE_MB READY_FILE
//
// Authentication stays on. The password in PASSWORD_FILE is given to the
// built-in `neo4j` user through the system database (embedded transactions
// are not subject to auth), so Bolt clients must present it. READY_FILE is
// written once that is done: the Bolt port opens earlier, and clients that try
// the new password before it is set would trip Neo4j's authentication rate limit.
// SIGTERM shuts the DBMS down cleanly through the shutdown hook.

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.connectors.HttpsConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.io.ByteUnit;

public final class Neo4jLauncher {
    private Neo4jLauncher() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println(
                    "usage: Neo4jLauncher HOME_DIR BOLT_PORT PASSWORD_FILE PAGECACHE_MB READY_FILE");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        int boltPort = Integer.parseInt(args[1]);
        String password = Files.readString(Path.of(args[2]), StandardCharsets.UTF_8).strip();
        long pagecacheMb = Long.parseLong(args[3]);
        Path readyFile = Path.of(args[4]);
        Files.deleteIfExists(readyFile);

        long began = System.nanoTime();
        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
                .setConfig(GraphDatabaseSettings.auth_enabled, true)
                .setConfig(GraphDatabaseSettings.pagecache_memory, ByteUnit.mebiBytes(pagecacheMb))
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", boltPort))
                .setConfig(BoltConnector.advertised_address, new SocketAddress("127.0.0.1", boltPort))
                .setConfig(HttpConnector.enabled, false)
                .setConfig(HttpsConnector.enabled, false)
                // Neo4j keeps two days of transaction logs by default, for
                // backups and clustering this stack has none of; benchmark
                // runs left 33 GB of them. Keep the newest 512 MB.
                .setConfig(GraphDatabaseSettings.keep_logical_logs, "512M size")
                // A statement is planned again when a label's or an index's
                // statistics have moved far enough since it was planned, at most
                // every 10 s by default. Every statement redstring runs seeks a
                // unique index, and its edge writes expand between bound nodes
                // (tests/integration/test_neo4j_plans.py), so a new plan is the
                // same plan; a store growing from empty replanned each
                // of them every few seconds (docs/performance.md). The key
                // lookups from lists carry seek hints: one replan without them
                // chose an index scan, which this interval then kept
                // (docs/performance.md, "Plans that moved").
                .setConfig(GraphDatabaseSettings.cypher_min_replan_interval, Duration.ofHours(1))
                .build();

        System.out.printf("neo4j-launcher: DBMS started in %.1fs%n", seconds(began));
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("neo4j-launcher: shutting down");
            dbms.shutdown();
            stopped.countDown();
        }, "neo4j-launcher-shutdown"));

        try {
            setPassword(
                    dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME),
                    password,
                    home.resolve("data").resolve("redstring-password.sha256"));
        } catch (Exception e) {
            e.printStackTrace();
            System.err.println("neo4j-launcher: could not set the password of user neo4j, stopping");
            System.exit(1);  // runs the shutdown hook
        }

        Files.writeString(readyFile, ProcessHandle.current().pid() + "\n");
        System.out.printf("neo4j-launcher: ready in %.1fs, bolt://127.0.0.1:%d%n", seconds(began), boltPort);
        System.out.flush();
        stopped.await();
    }

    private static double seconds(long since) {
        return (System.nanoTime() - since) / 1e9;
    }

    private static void setPassword(GraphDatabaseService system, String password, Path marker)
            throws Exception {
        // ALTER USER costs seconds on a cold JVM: skip it when this password was set before.
        String digest = HexFormat.of().formatHex(
                MessageDigest.getInstance("SHA-256").digest(password.getBytes(StandardCharsets.UTF_8)));
        if (Files.isRegularFile(marker) && Files.readString(marker).strip().equals(digest)) {
            return;
        }
        try {
            system.executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED",
                    Map.of("password", password));
        } catch (RuntimeException e) {
            // A restart with the same password file: the password is already set.
            String message = String.valueOf(e.getMessage());
            if (!message.contains("Old password and new password cannot be the same")) {
                throw e;
            }
        }
        Files.writeString(marker, digest + "\n");
    }
}
