/*
 * Runs stock Kafka command-line tools (StorageTool, MetadataQuorumCommand, DumpLogSegments, ...)
 * one after another inside one JVM, so that a test run pays Java's start-up and class loading
 * once per classpath rather than once per tool. It uses nothing but the JDK and reflection, so
 * the classes compiled against one release's lib/ also run on its tools-lib/ classpath.
 *
 * Protocol (all integers 4-byte big-endian, strings UTF-8):
 *
 *   on start-up   -> int MAGIC (0x4b575452, "KWTR")           ready for requests
 *   request       <- int n, then n times (int length, bytes)   the main class, then its args
 *   answer        -> int exit code, int length, stdout bytes, int length, stderr bytes
 *
 * The loop ends when stdin closes. Requests are answered one at a time, in order; the answers go
 * to the process's original standard output (FileDescriptor.out), never to System.out.
 *
 * A request runs MainClass.main(args) on this JVM's "main" thread and answers what a JVM that
 * ran only that class would have ended with:
 *
 *   - exit code: the status of the first Exit.exit/Exit.halt of Kafka's
 *     org.apache.kafka.common.utils.Exit (up to 4.3; kafka.utils.Exit delegates to it) or
 *     org.apache.kafka.common.utils.internals.Exit (4.4+), whose procedures throw an Error here;
 *     0 when main returns; 1 when a Throwable escapes main, printed to stderr as the JVM's
 *     default handler prints it ("Exception in thread "main" ...", frames below main cut).
 *   - stdout, stderr: the bytes written to System.out and System.err (also by Scala's Console,
 *     log4j's console appenders and any other thread) from the start of the call until that
 *     exit; what runs after it (catch and finally blocks the Error passes through) is not kept,
 *     as a real exit would have ended the process there. Closing System.out or System.err
 *     (MetadataShell closes a writer around System.out) ends it for the rest of the call only.
 *   - when main returns (or throws), the call waits for the non-daemon threads it started, as the
 *     JVM's DestroyJavaVM does before the process ends.
 *
 * What stays different: a stack trace a tool prints itself (its own catch block) ends with this
 * class's frames below main, and a tool's JVM-wide state (static fields, client ids, shutdown
 * hooks, which run when this JVM ends) outlives its call.
 *
 * Code that calls System.exit itself (argparse4j's parseArgsOrFail in MetadataShell and 3.x
 * FeatureCommand, on --help or a bad argument) ends this JVM: the client sees stdout close
 * mid-call and runs that request in a JVM of its own. System.in reads as empty; system
 * properties are restored after each call. Between calls, whatever is written to System.out or
 * System.err goes to the original standard error.
 */
package kwire.oracle;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.UnsupportedEncodingException;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Proxy;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Properties;
import java.util.Set;

public final class ToolRunner {
    static final int MAGIC = 0x4b575452;

    /** Kafka's Exit classes, by release: whichever are on the classpath get our procedures. */
    private static final String[] EXIT_CLASSES = {
        "org.apache.kafka.common.utils.Exit",
        "org.apache.kafka.common.utils.internals.Exit",
    };

    /** Thrown by Kafka's exit and halt procedures: unwinds main to this class. */
    private static final class Exited extends Error {
        private static final long serialVersionUID = 1L;

        Exited(int code) {
            super("exit " + code, null, false, false);
        }
    }

    /** The output and exit status of the call that is running. */
    private static final class Call {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final ByteArrayOutputStream err = new ByteArrayOutputStream();
        Integer exitCode;   // the first exit's status; output is no longer kept once it is set
        boolean outClosed;
        boolean errClosed;

        synchronized void write(boolean toErr, byte[] bytes, int off, int len) {
            if (exitCode == null && !(toErr ? errClosed : outClosed)) {
                (toErr ? err : out).write(bytes, off, len);
            }
        }

        synchronized void close(boolean toErr) {
            if (toErr) {
                errClosed = true;
            } else {
                outClosed = true;
            }
        }

        synchronized void exit(int code) {
            if (exitCode == null) {
                exitCode = code;
            }
        }

        synchronized Integer exitCode() {
            return exitCode;
        }
    }

    private static volatile Call current;

    /** System.out or System.err: the running call's buffer, else the original stderr. */
    private static final class Forward extends OutputStream {
        private final boolean toErr;
        private final OutputStream idle;

        Forward(boolean toErr, OutputStream idle) {
            this.toErr = toErr;
            this.idle = idle;
        }

        @Override
        public void write(int b) throws IOException {
            write(new byte[] {(byte) b}, 0, 1);
        }

        @Override
        public void write(byte[] bytes, int off, int len) throws IOException {
            Call call = current;
            if (call != null) {
                call.write(toErr, bytes, off, len);
            } else {
                synchronized (idle) {
                    idle.write(bytes, off, len);
                }
            }
        }
    }

    /** System.out or System.err: closing it (MetadataShell closes a writer around System.out)
     * ends that stream for the running call only, as it would have for a process of its own. */
    private static final class CallStream extends PrintStream {
        private final boolean toErr;

        CallStream(boolean toErr, OutputStream idle, String charset) throws UnsupportedEncodingException {
            super(new Forward(toErr, idle), true, charset);
            this.toErr = toErr;
        }

        @Override
        public void close() {
            flush();
            Call call = current;
            if (call != null) {
                call.close(toErr);
            }
        }
    }

    private ToolRunner() {
    }

    /** The charset the JVM gives System.out or System.err (JDK 17: sun.std*.encoding, then
     * the default charset; JDK 19+: std*.encoding). */
    private static String charsetOf(String stream) {
        for (String key : new String[] {stream + ".encoding", "sun." + stream + ".encoding"}) {
            String name = System.getProperty(key);
            if (name != null && Charset.isSupported(name)) {
                return name;
            }
        }
        return Charset.defaultCharset().name();
    }

    private static void installExitProcedures() {
        for (String name : EXIT_CLASSES) {
            Class<?> exit;
            Class<?> procedure;
            try {
                exit = Class.forName(name);
                procedure = Class.forName(name + "$Procedure");
            } catch (ClassNotFoundException absent) {
                continue;
            }
            Object handler = Proxy.newProxyInstance(
                ToolRunner.class.getClassLoader(), new Class<?>[] {procedure},
                (proxy, method, args) -> {
                    switch (method.getName()) {
                        case "execute": {
                            int code = (Integer) args[0];
                            Call call = current;
                            if (call != null) {
                                call.exit(code);
                            }
                            throw new Exited(code);
                        }
                        case "hashCode":
                            return System.identityHashCode(proxy);
                        case "equals":
                            return proxy == args[0];
                        case "toString":
                            return "ToolRunner exit procedure";
                        default:
                            throw new UnsupportedOperationException(method.getName());
                    }
                });
            try {
                exit.getMethod("setExitProcedure", procedure).invoke(null, handler);
                exit.getMethod("setHaltProcedure", procedure).invoke(null, handler);
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("cannot install exit procedures on " + name, e);
            }
        }
    }

    public static void main(String[] ignored) throws IOException {
        // The protocol's own channels, before System.out and System.in are replaced.
        DataInputStream requests = new DataInputStream(new FileInputStream(FileDescriptor.in));
        DataOutputStream answers = new DataOutputStream(new FileOutputStream(FileDescriptor.out));
        OutputStream idle = new FileOutputStream(FileDescriptor.err);
        // Before any tool class is loaded: Scala's Console and log4j's console appenders keep
        // the System.out/System.err they first see.
        System.setOut(newPrintStream(false, idle, charsetOf("stdout")));
        System.setErr(newPrintStream(true, idle, charsetOf("stderr")));
        System.setIn(new ByteArrayInputStream(new byte[0]));
        installExitProcedures();

        answers.writeInt(MAGIC);
        answers.flush();
        while (true) {
            String[] request;
            try {
                request = readRequest(requests);
            } catch (EOFException closed) {
                break;
            }
            Call call = new Call();
            int code = run(call, request[0], Arrays.copyOfRange(request, 1, request.length));
            answers.writeInt(code);
            answers.writeInt(call.out.size());
            call.out.writeTo(answers);
            answers.writeInt(call.err.size());
            call.err.writeTo(answers);
            answers.flush();
        }
        System.out.flush();
        System.err.flush();
    }

    private static PrintStream newPrintStream(boolean toErr, OutputStream idle, String charset) {
        try {
            return new CallStream(toErr, idle, charset);
        } catch (UnsupportedEncodingException e) {
            throw new IllegalStateException(e);   // charsetOf names supported charsets only
        }
    }

    private static String[] readRequest(DataInputStream in) throws IOException {
        int count = in.readInt();
        String[] request = new String[count];
        for (int i = 0; i < count; i++) {
            byte[] bytes = new byte[in.readInt()];
            in.readFully(bytes);
            request[i] = new String(bytes, StandardCharsets.UTF_8);
        }
        if (count == 0) {
            throw new IOException("empty request");
        }
        return request;
    }

    /** Runs one main class to its end as described above; returns the exit code. */
    private static int run(Call call, String mainClass, String[] args) {
        Thread self = Thread.currentThread();
        ClassLoader loader = self.getContextClassLoader();
        Properties properties = (Properties) System.getProperties().clone();
        Set<Thread> before = Collections.newSetFromMap(new IdentityHashMap<>());
        before.addAll(Thread.getAllStackTraces().keySet());
        current = call;
        int code;
        try {
            code = invokeMain(call, mainClass, args);
            if (call.exitCode() == null) {
                awaitThreadsStartedSince(before);
            }
            Integer exited = call.exitCode();
            if (exited != null) {
                code = exited;
            }
        } finally {
            System.out.flush();
            System.err.flush();
            current = null;
            Thread.interrupted();
            self.setName("main");
            self.setContextClassLoader(loader);
            System.setProperties(properties);
        }
        return code;
    }

    private static int invokeMain(Call call, String mainClass, String[] args) {
        MethodHandle main;
        try {
            main = MethodHandles.publicLookup().findStatic(
                Class.forName(mainClass, true, ClassLoader.getSystemClassLoader()), "main",
                MethodType.methodType(void.class, String[].class));
        } catch (ClassNotFoundException | LinkageError e) {
            System.err.println("Error: Could not find or load main class " + mainClass);
            System.err.println("Caused by: " + e);
            return 1;
        } catch (NoSuchMethodException | IllegalAccessException e) {
            System.err.println("Error: Main method not found in class " + mainClass
                + ", please define the main method as:");
            System.err.println("   public static void main(String[] args)");
            System.err.println("or a JavaFX application class must extend javafx.application.Application");
            return 1;
        }
        try {
            // a method handle's own frames are hidden: below main, a trace shows only ours
            main.invokeExact(args);
            return 0;
        } catch (Throwable thrown) {
            Integer exited = call.exitCode();
            if (exited != null) {
                return exited;
            }
            if (thrown instanceof Exited) {
                return 1;
            }
            cutBelowMain(thrown, mainClass, Collections.newSetFromMap(new IdentityHashMap<>()));
            System.err.print("Exception in thread \"" + Thread.currentThread().getName() + "\" ");
            thrown.printStackTrace(System.err);
            return 1;
        }
    }

    /** Drops the ToolRunner frames below the main method from ``thrown``, its
     * causes and suppressed exceptions, so that the trace reads as the JVM would print it. */
    private static void cutBelowMain(Throwable thrown, String mainClass, Set<Throwable> seen) {
        if (thrown == null || !seen.add(thrown)) {
            return;
        }
        StackTraceElement[] frames = thrown.getStackTrace();
        for (int i = frames.length - 1; i >= 0; i--) {
            if (frames[i].getClassName().equals(mainClass) && frames[i].getMethodName().equals("main")) {
                thrown.setStackTrace(Arrays.copyOf(frames, i + 1));
                break;
            }
        }
        cutBelowMain(thrown.getCause(), mainClass, seen);
        for (Throwable suppressed : thrown.getSuppressed()) {
            cutBelowMain(suppressed, mainClass, seen);
        }
    }

    /** Joins the live non-daemon threads that are not in ``before``, until there are none
     * (a thread may start another), or until one of them exits through Kafka's Exit. */
    private static void awaitThreadsStartedSince(Set<Thread> before) {
        Thread self = Thread.currentThread();
        while (current != null && current.exitCode() == null) {
            List<Thread> waiting = new ArrayList<>();
            for (Thread thread : Thread.getAllStackTraces().keySet()) {
                if (thread != self && !thread.isDaemon() && thread.isAlive() && !before.contains(thread)) {
                    waiting.add(thread);
                }
            }
            if (waiting.isEmpty()) {
                return;
            }
            for (Thread thread : waiting) {
                try {
                    while (thread.isAlive() && current.exitCode() == null) {
                        thread.join(100);
                    }
                } catch (InterruptedException e) {
                    return;
                }
            }
        }
    }
}
