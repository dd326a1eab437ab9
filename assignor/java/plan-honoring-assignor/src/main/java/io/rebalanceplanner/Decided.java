package io.rebalanceplanner;

import io.rebalanceplanner.core.ClientTasks;
import java.util.Map;
import org.apache.kafka.streams.processor.assignment.TaskAssignor.TaskAssignment;

/**
 * An assignment for Kafka and, when one of our own assignors made it, the same per process with warmups told
 * apart from standbys ({@code tasks} is null for Kafka's assignors, which know no warmups).
 */
record Decided(TaskAssignment assignment, Map<String, ClientTasks> tasks) {}
