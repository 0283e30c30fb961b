package kwire.policy;

import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.errors.PolicyViolationException;
import org.apache.kafka.server.policy.CreateTopicPolicy;

/**
 * A create-topic policy for the differential policy test (compat/test_policies.py): a topic
 * needs at least {@code policy.min.partitions} partitions (a controller config, read in
 * configure). The refusal names every field of the request, so that the Python twin in
 * compat/example_policies.py answers alike only when it was shown the same request. A topic
 * named "crash" makes it throw an unexpected exception.
 */
public class MinPartitionsPolicy implements CreateTopicPolicy {
    private int min = 1;

    @Override
    public void configure(Map<String, ?> configs) {
        Object value = configs.get("policy.min.partitions");
        if (value != null) {
            min = Integer.parseInt(value.toString());
        }
    }

    @Override
    public void validate(RequestMetadata request) throws PolicyViolationException {
        if (request.topic().equals("crash")) {
            throw new IllegalStateException("this policy cannot judge " + request.topic());
        }
        int count = request.numPartitions() != null ? request.numPartitions() : request.replicasAssignments().size();
        if (count < min) {
            Object assignments = request.replicasAssignments() == null ? null : new TreeMap<>(request.replicasAssignments());
            throw new PolicyViolationException("Topic " + request.topic() + " refused: numPartitions="
                + request.numPartitions() + ", replicationFactor=" + request.replicationFactor()
                + ", replicasAssignments=" + assignments + ", configs=" + new TreeMap<>(request.configs())
                + "; at least " + min + " partitions required.");
        }
    }

    @Override
    public void close() {
    }
}
