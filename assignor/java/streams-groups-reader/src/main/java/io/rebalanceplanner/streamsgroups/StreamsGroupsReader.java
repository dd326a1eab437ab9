package io.rebalanceplanner.streamsgroups;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsResult;
import org.apache.kafka.clients.admin.DescribeStreamsGroupsOptions;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Prints every streams-protocol group (KIP-1071) of a cluster as JSON lines on stdout: one {@code group} (or
 * {@code group_error}) line per group, then one {@code end} line; a {@code fatal} line and exit status 1 when the
 * groups cannot be listed. Logs go to stderr. Run once per extract by jobs/pipeline/streams_reader.py.
 *
 * <p>Usage: {@code --bootstrap HOST:PORT [--command-config FILE] [--timeout-ms N]}; the file holds Java client
 * properties (SASL/TLS).
 */
public final class StreamsGroupsReader {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    static final int DEFAULT_TIMEOUT_MS = 30_000;
    static final int MAX_TIMEOUT_MS = 600_000;

    private StreamsGroupsReader() {}

    public static void main(String[] args) {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        int status;
        try {
            Arguments arguments = Arguments.parse(args);
            status = run(arguments, out);
        } catch (IllegalArgumentException | IOException e) {
            print(out, GroupJson.fatal("bad arguments: " + e.getMessage()));
            status = 2;
        }
        out.flush();
        System.exit(status);
    }

    /** What the command line says: where the cluster is, how to reach it, how long each call may take. */
    record Arguments(String bootstrap, Properties client, int timeoutMs) {
        static Arguments parse(String[] args) throws IOException {
            String bootstrap = null;
            Path config = null;
            int timeoutMs = DEFAULT_TIMEOUT_MS;
            for (int i = 0; i < args.length; i++) {
                String flag = args[i];
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException(flag + " needs a value");
                }
                String value = args[++i];
                switch (flag) {
                    case "--bootstrap" -> bootstrap = value;
                    case "--command-config" -> config = Path.of(value);
                    case "--timeout-ms" -> timeoutMs = boundedTimeout(value);
                    default -> throw new IllegalArgumentException("unknown flag " + flag);
                }
            }
            if (bootstrap == null || bootstrap.isBlank()) {
                throw new IllegalArgumentException("--bootstrap HOST:PORT is required");
            }
            Properties client = new Properties();
            if (config != null) {
                try (InputStream in = Files.newInputStream(config)) {
                    client.load(in);
                }
            }
            return new Arguments(bootstrap, client, timeoutMs);
        }

        private static int boundedTimeout(String value) {
            if (!value.matches("[0-9]{1,7}")) {
                throw new IllegalArgumentException("--timeout-ms must be 1.." + MAX_TIMEOUT_MS + ", not " + value);
            }
            int ms = Integer.parseInt(value);
            if (ms < 1 || ms > MAX_TIMEOUT_MS) {
                throw new IllegalArgumentException("--timeout-ms must be 1.." + MAX_TIMEOUT_MS + ", not " + value);
            }
            return ms;
        }
    }

    static int run(Arguments arguments, PrintStream out) {
        Map<String, Object> conf = new HashMap<>();
        arguments.client().forEach((k, v) -> conf.put(String.valueOf(k), v));
        conf.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, arguments.bootstrap());
        conf.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, arguments.timeoutMs());
        conf.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, arguments.timeoutMs());
        conf.putIfAbsent(AdminClientConfig.CLIENT_ID_CONFIG, "rebalance-planner-extract-streams");
        long timeout = arguments.timeoutMs();
        try (Admin admin = Admin.create(conf)) {
            // Reaching the cluster first names the cause (authentication, TLS) that ListGroups would only report
            // as "failed to find brokers".
            admin.describeCluster().clusterId().get(timeout, TimeUnit.MILLISECONDS);
            List<String> groups = new ArrayList<>();
            for (GroupListing g : admin.listGroups(ListGroupsOptions.forStreamsGroups()).all()
                    .get(timeout, TimeUnit.MILLISECONDS)) {
                groups.add(g.groupId());
            }
            groups.sort(null);
            Map<String, KafkaFuture<StreamsGroupDescription>> described = groups.isEmpty() ? Map.of()
                    : admin.describeStreamsGroups(groups, new DescribeStreamsGroupsOptions()
                            .timeoutMs(arguments.timeoutMs())).describedGroups();
            Map<String, Map<String, String>> configs = new TreeMap<>();
            Map<String, String> configErrors = new TreeMap<>();
            readConfigs(admin, groups, timeout, configs, configErrors);
            int ok = 0;
            for (String groupId : groups) {
                try {
                    StreamsGroupDescription d = described.get(groupId).get(timeout, TimeUnit.MILLISECONDS);
                    print(out, GroupJson.group(d, configs.get(groupId), configErrors.get(groupId)));
                    ok++;
                } catch (ExecutionException e) {
                    print(out, GroupJson.groupError(groupId, describe(e.getCause())));
                } catch (TimeoutException e) {
                    print(out, GroupJson.groupError(groupId, "not described within " + timeout + " ms"));
                }
            }
            print(out, GroupJson.end(groups.size(), ok));
            return 0;
        } catch (ExecutionException e) {
            // The Admin client's own deadline (equal to ours) may fire first: the same timeout, said the same way.
            if (e.getCause() instanceof org.apache.kafka.common.errors.TimeoutException) {
                print(out, GroupJson.fatal("reaching the cluster or listing streams groups took longer than "
                        + timeout + " ms"));
            } else {
                print(out, GroupJson.fatal("reaching the cluster or listing streams groups failed: "
                        + describe(e.getCause())));
            }
        } catch (TimeoutException e) {
            print(out, GroupJson.fatal("reaching the cluster or listing streams groups took longer than " + timeout
                    + " ms"));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            print(out, GroupJson.fatal("interrupted"));
        } catch (RuntimeException e) {
            print(out, GroupJson.fatal(describe(e)));
        }
        return 1;
    }

    /** The GROUP-resource configs of each group (KIP-1071's streams.* assignment configs), or why not. */
    private static void readConfigs(Admin admin, List<String> groups, long timeout,
            Map<String, Map<String, String>> configs, Map<String, String> errors) throws InterruptedException {
        if (groups.isEmpty()) {
            return;
        }
        List<ConfigResource> resources = new ArrayList<>();
        for (String g : groups) {
            resources.add(new ConfigResource(ConfigResource.Type.GROUP, g));
        }
        DescribeConfigsResult result = admin.describeConfigs(resources);
        for (Map.Entry<ConfigResource, KafkaFuture<Config>> e : result.values().entrySet()) {
            String group = e.getKey().name();
            try {
                Map<String, String> values = new TreeMap<>();
                for (ConfigEntry entry : e.getValue().get(timeout, TimeUnit.MILLISECONDS).entries()) {
                    if (entry.name().startsWith("streams.")) {
                        values.put(entry.name(), entry.value());
                    }
                }
                configs.put(group, values);
            } catch (ExecutionException err) {
                errors.put(group, describe(err.getCause()));
            } catch (TimeoutException err) {
                errors.put(group, "configs not described within " + timeout + " ms");
            }
        }
    }

    private static String describe(Throwable error) {
        return error == null ? "unknown error" : error.getClass().getSimpleName() + ": " + error.getMessage();
    }

    private static void print(PrintStream out, ObjectNode line) {
        try {
            out.println(MAPPER.writeValueAsString(line));
        } catch (IOException e) {
            throw new IllegalStateException("a JSON tree that does not serialize: " + e, e);
        }
    }
}
