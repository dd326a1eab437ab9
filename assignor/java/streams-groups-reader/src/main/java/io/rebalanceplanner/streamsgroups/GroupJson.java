package io.rebalanceplanner.streamsgroups;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription;
import org.apache.kafka.common.Node;

/**
 * The JSON lines the reader prints (pure: Admin's descriptions in, Jackson trees out). The Python side
 * (jobs/pipeline/broker_streams.py) bounds and checks every value; this side only transcribes.
 */
final class GroupJson {
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    private GroupJson() {}

    /** One described group with its group configs ({@code configs} null when they could not be read). */
    static ObjectNode group(StreamsGroupDescription group, Map<String, String> configs, String configsError) {
        ObjectNode out = line("group");
        out.put("group_id", group.groupId());
        out.put("state", group.groupState() == null ? "" : group.groupState().toString());
        out.put("group_epoch", group.groupEpoch());
        out.put("target_assignment_epoch", group.targetAssignmentEpoch());
        out.put("topology_epoch", group.topologyEpoch());
        out.put("assignor_name", group.assignorName().orElse(null));
        out.put("coordinator", coordinator(group.coordinator()));
        ArrayNode subtopologies = out.putArray("subtopologies");
        for (StreamsGroupSubtopologyDescription s : group.subtopologies()) {
            subtopologies.add(subtopology(s));
        }
        ArrayNode members = out.putArray("members");
        for (StreamsGroupMemberDescription m : group.members()) {
            members.add(member(m));
        }
        if (configs == null) {
            out.putNull("configs");
        } else {
            ObjectNode c = out.putObject("configs");
            new TreeMap<>(configs).forEach(c::put);
        }
        out.put("configs_error", configsError);
        return out;
    }

    /** A group the broker listed but would not describe, and why. */
    static ObjectNode groupError(String groupId, String error) {
        return line("group_error").put("group_id", groupId).put("error", error);
    }

    /** The last line of a complete run: without it the reader's output is incomplete. */
    static ObjectNode end(int listed, int described) {
        return line("end").put("listed", listed).put("described", described);
    }

    /** Why the whole run failed (the broker unreachable, listing refused, bad arguments). */
    static ObjectNode fatal(String error) {
        return line("fatal").put("error", error);
    }

    private static ObjectNode line(String kind) {
        return JSON.objectNode().put("kind", kind);
    }

    private static String coordinator(Node node) {
        return node == null ? "" : node.host() + ":" + node.port() + " (id " + node.id() + ")";
    }

    private static ObjectNode subtopology(StreamsGroupSubtopologyDescription s) {
        ObjectNode out = JSON.objectNode();
        out.put("subtopology_id", s.subtopologyId());
        out.set("source_topics", strings(s.sourceTopics()));
        out.set("repartition_sink_topics", strings(s.repartitionSinkTopics()));
        out.set("state_changelog_topics", topicPartitions(s.stateChangelogTopics()));
        out.set("repartition_source_topics", topicPartitions(s.repartitionSourceTopics()));
        return out;
    }

    private static ObjectNode topicPartitions(Map<String, StreamsGroupSubtopologyDescription.TopicInfo> topics) {
        ObjectNode out = JSON.objectNode();
        new TreeMap<>(topics).forEach((name, info) -> out.put(name, info.partitions()));
        return out;
    }

    private static ObjectNode member(StreamsGroupMemberDescription m) {
        ObjectNode out = JSON.objectNode();
        out.put("member_id", m.memberId());
        out.put("member_epoch", m.memberEpoch());
        out.put("instance_id", m.instanceId().orElse(null));
        out.put("rack_id", m.rackId().orElse(null));
        out.put("client_id", m.clientId());
        out.put("client_host", m.clientHost());
        out.put("topology_epoch", m.topologyEpoch());
        out.put("process_id", m.processId());
        out.put("user_endpoint", m.userEndpoint().map(e -> e.host() + ":" + e.port()).orElse(null));
        ObjectNode tags = out.putObject("client_tags");
        new TreeMap<>(m.clientTags()).forEach(tags::put);
        out.set("task_offsets", offsets(m.taskOffsets()));
        out.set("task_end_offsets", offsets(m.taskEndOffsets()));
        out.set("assignment", assignment(m.assignment()));
        out.set("target_assignment", assignment(m.targetAssignment()));
        out.put("is_classic", m.isClassic());
        return out;
    }

    /** Offsets as {@code [subtopology, partition, offset]} triples: the subtopology id is a string in KIP-1071. */
    private static ArrayNode offsets(List<StreamsGroupMemberDescription.TaskOffset> offsets) {
        ArrayNode out = JSON.arrayNode();
        for (StreamsGroupMemberDescription.TaskOffset o : offsets) {
            out.add(JSON.arrayNode().add(o.subtopologyId()).add(o.partition()).add(o.offset()));
        }
        return out;
    }

    private static JsonNode assignment(StreamsGroupMemberAssignment a) {
        if (a == null) {
            return JSON.nullNode();
        }
        ObjectNode out = JSON.objectNode();
        out.set("active", tasks(a.activeTasks()));
        out.set("standby", tasks(a.standbyTasks()));
        out.set("warmup", tasks(a.warmupTasks()));
        return out;
    }

    private static ObjectNode tasks(Collection<StreamsGroupMemberAssignment.TaskIds> tasks) {
        ObjectNode out = JSON.objectNode();
        for (StreamsGroupMemberAssignment.TaskIds t : tasks) {
            ArrayNode partitions = out.has(t.subtopologyId())
                    ? (ArrayNode) out.get(t.subtopologyId()) : out.putArray(t.subtopologyId());
            t.partitions().forEach(partitions::add);
        }
        return out;
    }

    private static ArrayNode strings(Collection<String> values) {
        ArrayNode out = JSON.arrayNode();
        values.forEach(out::add);
        return out;
    }
}
