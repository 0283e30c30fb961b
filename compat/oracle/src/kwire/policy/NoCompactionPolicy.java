package kwire.policy;

import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.PolicyViolationException;
import org.apache.kafka.server.policy.AlterConfigPolicy;

/**
 * An alter-config policy for the differential policy test (compat/test_policies.py): no topic
 * may be compacted; and a broker resource setting message.max.bytes to 0, or a topic setting
 * max.message.bytes to 0, makes it throw an unexpected exception. The refusal names the resource and the configs it was shown.
 */
public class NoCompactionPolicy implements AlterConfigPolicy {
    @Override
    public void configure(Map<String, ?> configs) {
    }

    @Override
    public void validate(RequestMetadata request) throws PolicyViolationException {
        Map<String, String> configs = new TreeMap<>(request.configs());
        ConfigResource resource = request.resource();
        String policy = configs.get("cleanup.policy");
        if (resource.type() == ConfigResource.Type.TOPIC && policy != null && policy.contains("compact")) {
            throw new PolicyViolationException("No compaction: " + resource.type() + " " + resource.name() + " "
                + configs);
        }
        if (resource.type() == ConfigResource.Type.BROKER && "0".equals(configs.get("message.max.bytes"))) {
            throw new IllegalStateException("message.max.bytes=0 breaks this policy");
        }
        if (resource.type() == ConfigResource.Type.TOPIC && "0".equals(configs.get("max.message.bytes"))) {
            throw new IllegalStateException("max.message.bytes=0 breaks this policy");
        }
    }

    @Override
    public void close() {
    }
}
