/*
 * A codec oracle for kwire's compatibility tests, compiled against one stock Kafka release.
 *
 * It answers questions about Kafka's own generated message classes, one JSON object per line on
 * stdin, one JSON object per line on stdout, in order:
 *
 *   {"op":"encode","class":"org.apache.kafka.common.message.VoteRequestData","version":1,"json":{...}}
 *     -> {"ok":true,"hex":"..."}      the bytes the class writes for the object that its
 *                                     <Class>JsonConverter.read(json, version) builds
 *   {"op":"decode","class":"...","version":1,"hex":"..."}
 *     -> {"ok":true,"json":{...},"remaining":0}
 *                                     <Class>JsonConverter.write(new <Class>(bytes, version),
 *                                     version); "remaining" counts bytes the class did not read
 *   {"op":"reencode","class":"...","version":1,"hex":"..."}
 *     -> {"ok":true,"hex":"...","remaining":0}
 *                                     the bytes the class writes after reading "hex" (unknown
 *                                     tagged fields are kept by the class and written back)
 *   {"op":"ping"} -> {"ok":true,"kafka":"<version of kafka-clients on the classpath>"}
 *   {"op":"configdef","class":"kafka.server.KafkaConfig","member":"configDef"}
 *     -> {"ok":true,"keys":[{"name":..,"type":"INT","default":"1","internal":false},..]}
 *                                     the keys of the ConfigDef a static method or field holds,
 *                                     in definition order; "default" is the default as
 *                                     ConfigDef.convertToString writes it (null for a null
 *                                     default, absent when the key has none)
 *   {"op":"names","class":"...","member":"ALL_DYNAMIC_CONFIGS"}
 *     -> {"ok":true,"names":[..]}     the strings a static collection holds, sorted
 *
 * Any failure is answered with {"ok":false,"error":"<exception class>: <message>"}; the loop only
 * ends when stdin closes. Output is flushed whenever no further input is waiting, so a client
 * may pipeline thousands of requests and read the answers back in one go.
 */
package kwire.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.config.ConfigDef;

import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.Readable;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;

public final class Oracle {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final HexFormat HEX = HexFormat.of();

    /** The reflective handles for one generated message class. */
    private static final class Codec {
        final Constructor<?> fromBytes;   // <Class>(Readable, short)
        final Method jsonRead;            // <Class>JsonConverter.read(JsonNode, short)
        final Method jsonWrite;           // <Class>JsonConverter.write(<Class>, short)

        Codec(String className) throws ReflectiveOperationException {
            Class<?> cls = Class.forName(className);
            if (!Message.class.isAssignableFrom(cls)) {
                throw new IllegalArgumentException(className + " is not a Kafka Message");
            }
            Class<?> converter = Class.forName(className + "JsonConverter");
            fromBytes = cls.getConstructor(Readable.class, short.class);
            jsonRead = converter.getMethod("read", JsonNode.class, short.class);
            jsonWrite = converter.getMethod("write", cls, short.class);
        }
    }

    private final Map<String, Codec> codecs = new HashMap<>();

    private Codec codec(String className) throws ReflectiveOperationException {
        Codec codec = codecs.get(className);
        if (codec == null) {
            codec = new Codec(className);
            codecs.put(className, codec);
        }
        return codec;
    }

    private ObjectNode answer(JsonNode request) throws Exception {
        String op = text(request, "op");
        ObjectNode out = MAPPER.createObjectNode();
        switch (op) {
            case "ping": {
                out.put("ok", true);
                out.put("kafka", kafkaVersion());
                return out;
            }
            case "encode": {
                Codec codec = codec(text(request, "class"));
                short version = version(request);
                JsonNode json = request.get("json");
                if (json == null) {
                    throw new IllegalArgumentException("encode needs \"json\"");
                }
                Message message = (Message) codec.jsonRead.invoke(null, json, version);
                out.put("ok", true);
                out.put("hex", HEX.formatHex(serialize(message, version)));
                return out;
            }
            case "reencode": {
                Codec codec = codec(text(request, "class"));
                short version = version(request);
                ByteBuffer buffer = ByteBuffer.wrap(HEX.parseHex(text(request, "hex")));
                Message message = (Message) codec.fromBytes.newInstance(
                    new ByteBufferAccessor(buffer), version);
                out.put("ok", true);
                out.put("hex", HEX.formatHex(serialize(message, version)));
                out.put("remaining", buffer.remaining());
                return out;
            }
            case "decode": {
                Codec codec = codec(text(request, "class"));
                short version = version(request);
                ByteBuffer buffer = ByteBuffer.wrap(HEX.parseHex(text(request, "hex")));
                ByteBufferAccessor accessor = new ByteBufferAccessor(buffer);
                Object message = codec.fromBytes.newInstance(accessor, version);
                JsonNode json = (JsonNode) codec.jsonWrite.invoke(null, message, version);
                out.put("ok", true);
                out.set("json", json);
                out.put("remaining", buffer.remaining());
                return out;
            }
            case "configdef": {
                ConfigDef def = (ConfigDef) staticMember(request);
                ArrayNode keys = out.putArray("keys");
                for (ConfigDef.ConfigKey key : def.configKeys().values()) {
                    ObjectNode entry = keys.addObject();
                    entry.put("name", key.name);
                    entry.put("type", key.type.name());
                    if (key.defaultValue != ConfigDef.NO_DEFAULT_VALUE) {
                        entry.put("default", ConfigDef.convertToString(key.defaultValue, key.type));
                    }
                    entry.put("internal", key.internalConfig);
                }
                out.put("ok", true);
                return out;
            }
            case "names": {
                ArrayNode names = out.putArray("names");
                new TreeSet<>((Collection<?>) staticMember(request)).forEach(name -> names.add((String) name));
                out.put("ok", true);
                return out;
            }
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    /** The value of the static no-argument method or static field (private too) "member" of
     *  "class". */
    private static Object staticMember(JsonNode request) throws ReflectiveOperationException {
        Class<?> cls = Class.forName(text(request, "class"));
        String member = text(request, "member");
        try {
            return cls.getMethod(member).invoke(null);
        } catch (NoSuchMethodException e) {
            Field field = cls.getDeclaredField(member);
            field.setAccessible(true);
            return field.get(null);
        }
    }

    /** The bytes {@code message} writes at {@code version}, checked against its own size(). */
    private static byte[] serialize(Message message, short version) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        int size = message.size(cache, version);
        ByteBuffer buffer = ByteBuffer.allocate(size);
        message.write(new ByteBufferAccessor(buffer), cache, version);
        if (buffer.hasRemaining()) {
            throw new IllegalStateException("wrote " + buffer.position()
                + " bytes but size() said " + size);
        }
        return buffer.array();
    }

    /** The release of the kafka-clients jar this process loaded its message classes from. */
    private static String kafkaVersion() throws IOException {
        try (InputStream in = Message.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in == null) {
                return "unknown";
            }
            Properties props = new Properties();
            props.load(in);
            return props.getProperty("version", "unknown");
        }
    }

    private static String text(JsonNode request, String key) {
        JsonNode node = request.get(key);
        if (node == null || !node.isTextual()) {
            throw new IllegalArgumentException("request needs a string \"" + key + "\"");
        }
        return node.asText();
    }

    private static short version(JsonNode request) {
        JsonNode node = request.get("version");
        if (node == null || !node.canConvertToInt()) {
            throw new IllegalArgumentException("request needs an integer \"version\"");
        }
        int version = node.asInt();
        if (version < Short.MIN_VALUE || version > Short.MAX_VALUE) {
            throw new IllegalArgumentException("version out of range: " + version);
        }
        return (short) version;
    }

    private static ObjectNode failure(Throwable error) {
        Throwable cause = error;
        while ((cause instanceof InvocationTargetException || cause instanceof ExceptionInInitializerError)
                && cause.getCause() != null) {
            cause = cause.getCause();
        }
        ObjectNode out = MAPPER.createObjectNode();
        out.put("ok", false);
        out.put("error", cause.getClass().getName() + ": " + cause.getMessage());
        if (System.getenv("KWIRE_ORACLE_TRACE") != null) {
            StringWriter trace = new StringWriter();
            cause.printStackTrace(new PrintWriter(trace));
            out.put("trace", trace.toString());
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        Oracle oracle = new Oracle();
        BufferedReader in = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
        BufferedWriter out = new BufferedWriter(
            new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode reply;
            try {
                reply = oracle.answer(MAPPER.readTree(line));
            } catch (Throwable error) {
                reply = failure(error);
            }
            out.write(MAPPER.writeValueAsString(reply));
            out.write('\n');
            if (!in.ready()) {
                out.flush();
            }
        }
        out.flush();
    }
}
