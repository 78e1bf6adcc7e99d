import java.io.File;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import jep.Jep;
import jep.JepConfig;
import jep.JepException;
import jep.SharedInterpreter;

/**
 * The calls GROBID makes into DeLFT, made the way GROBID makes them, against the directory that
 * {@code textorch grobid-bridge} writes (GROBID's {@code delft.install}). Run by
 * tests/jvm/test_jvm_bridge.py; written for textorch's tests, not taken from GROBID.
 *
 * <p>What is reproduced: every Python statement runs on the single thread of a one-thread
 * executor, which owns one {@code jep.SharedInterpreter} created on first use with the bridge
 * directory on the include path, then {@code os.chdir} into it and the imports GROBID makes;
 * {@code label} may be called from any Java thread and waits for its task on that executor;
 * training runs {@code python3 delft/applications/grobidTagger.py MODEL train ...} in the bridge
 * directory as a child process.
 *
 * <p>Usage: {@code java -Dgrobid.bridge=DIR -Dgrobid.models=DIR -Dpython.paths=P1:P2 GrobidCalls OUT STEP...}
 * where each STEP is {@code train,MODEL,ARCH,TRAINING_FILE} or
 * {@code label,MODEL,ARCH,DOCUMENTS_DIR,THREADS,CALLS}. {@code python.paths} are added to the
 * include path after the bridge (GROBID adds its virtualenv's site-packages there). Each step
 * writes into {@code OUT/STEP_NUMBER}: the labelled documents, or {@code error.txt} when it
 * failed (GROBID only logs such failures and carries on; so does this program).
 */
public final class GrobidCalls {
    private static final ExecutorService PYTHON_THREAD = Executors.newSingleThreadExecutor();
    private static final Map<Long, Jep> INTERPRETERS = new ConcurrentHashMap<>();
    private static final String BRIDGE = new File(System.getProperty("grobid.bridge")).getAbsolutePath();
    private static final String MODELS = new File(System.getProperty("grobid.models")).getAbsolutePath();

    private GrobidCalls() {
    }

    public static void main(String[] args) {
        int failed = 0;
        try {
            // absolute: the os.chdir GROBID makes in Python moves this whole process
            Path out = Paths.get(args[0]).toAbsolutePath();
            for (int i = 1; i < args.length; i++) {
                Path dir = out.resolve(String.valueOf(i));
                Files.createDirectories(dir);
                try {
                    runStep(args[i].split(","), dir);
                } catch (Exception e) {
                    failed++;
                    write(dir.resolve("error.txt"), stackTrace(e));
                }
            }
            PYTHON_THREAD.submit(GrobidCalls::closeInterpreters).get();
            PYTHON_THREAD.shutdown();
            PYTHON_THREAD.awaitTermination(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            failed++;
            e.printStackTrace();
        } finally {
            System.out.flush();
            // neither the executor's thread nor a Python thread left running may keep the JVM alive
            System.exit(failed == 0 ? 0 : 1);
        }
    }

    private static void runStep(String[] step, Path dir) throws Exception {
        if (step[0].equals("train")) {
            train(step[1], step[2], step[3], dir);
        } else if (step[0].equals("label")) {
            labelDocuments(step[1], step[2], Paths.get(step[3]).toAbsolutePath(), Integer.parseInt(step[4]),
                Integer.parseInt(step[5]), dir);
        } else {
            throw new IllegalArgumentException("unknown step " + String.join(",", step));
        }
    }

    // ---------------------------------------------------------------- the interpreter

    /** The calling thread's interpreter, made on first use (only the executor's thread calls this). */
    private static Jep interpreter() throws JepException {
        long thread = Thread.currentThread().getId();
        Jep jep = INTERPRETERS.get(thread);
        if (jep == null) {
            jep = openInterpreter();
            INTERPRETERS.put(thread, jep);
        }
        return jep;
    }

    private static Jep openInterpreter() throws JepException {
        JepConfig config = new JepConfig();
        config.addIncludePaths(BRIDGE);
        for (String path : System.getProperty("python.paths", "").split(File.pathSeparator)) {
            if (!path.isEmpty()) {
                config.addIncludePaths(path);
            }
        }
        config.redirectStdout(System.out);
        config.redirectStdErr(System.err);
        config.setClassLoader(Thread.currentThread().getContextClassLoader());
        try {
            SharedInterpreter.setConfig(config);
        } catch (JepException e) {
            // set once per JVM: a second interpreter keeps the first configuration, as in GROBID
        }
        Jep jep = new SharedInterpreter();
        jep.eval("import os");
        jep.eval("os.chdir('" + BRIDGE + "')");
        jep.eval("from delft.utilities.Embeddings import Embeddings");
        jep.eval("import delft.sequenceLabelling");
        jep.eval("from delft.sequenceLabelling import Sequence");
        jep.eval("from delft.sequenceLabelling.reader import load_data_and_labels_crf_file");
        jep.eval("from delft.sequenceLabelling.reader import load_data_crf_string");
        try {
            // GROBID's own import for its in-process training; textorch does not need it
            jep.eval("from sklearn.model_selection import train_test_split");
        } catch (JepException e) {
            if (!String.valueOf(e.getMessage()).contains("No module named 'sklearn'")) {
                throw e;
            }
        }
        return jep;
    }

    private static Void closeInterpreters() throws JepException {
        for (Jep jep : INTERPRETERS.values()) {
            jep.close();
        }
        INTERPRETERS.clear();
        return null;
    }

    // ---------------------------------------------------------------- a model: load, label

    /** GROBID's Python variable of a model: its name with '-' as '_'. */
    private static String variable(String model) {
        return model.replace("-", "_");
    }

    private static void initModel(String model, String architecture) throws Exception {
        String name = variable(model);
        PYTHON_THREAD.submit(() -> {
            Jep jep = interpreter();
            jep.eval(name + " = Sequence('" + model + "-" + architecture + "')");
            jep.eval(name + ".load(dir_path='" + MODELS + "')");
            jep.eval(name + ".model_config.max_sequence_length=3000");
            jep.eval(name + ".model_config.batch_size=20");
            return null;
        }).get();
    }

    /** The text GROBID's label() returns: each input line, a tab, its label in GROBID's spelling. */
    private static String label(String model, String architecture, String data) throws Exception {
        String name = variable(model);
        Future<String> answer = PYTHON_THREAD.submit(() -> {
            Jep jep = interpreter();
            try {
                jep.set("input", data);
                jep.eval("x_all, f_all = load_data_crf_string(input)");
                String call = architecture.contains("FEATURE") ? ".tag(x_all, None, features=f_all)" : ".tag(x_all, None)";
                @SuppressWarnings("unchecked")
                List<List<List<String>>> tagged = (List<List<List<String>>>) jep.getValue(name + call);
                return joinLabels(data, tagged);
            } finally {
                jep.eval("del input");
                jep.eval("del x_all");
                jep.eval("del f_all");
            }
        });
        return answer.get().replace(" ", "\t");
    }

    /** Lines of ``data`` with the label of their token appended; blank lines separate sequences. */
    private static String joinLabels(String data, List<List<List<String>>> tagged) {
        StringBuilder text = new StringBuilder();
        int sequence = 0;
        int token = 0;
        for (String raw : data.split("\n", -1)) {
            String line = raw.trim();
            if (line.isEmpty()) {
                if (token > 0) {
                    sequence++;
                    token = 0;
                }
                continue;
            }
            List<List<String>> labels = sequence < tagged.size() ? tagged.get(sequence) : List.of();
            String label = token < labels.size() ? grobidLabel(labels.get(token).get(1)) : "<other>";
            text.append(line).append(' ').append(label).append('\n');
            token++;
        }
        return text.toString();
    }

    /** DeLFT's IOB label in GROBID's spelling: B-x starts a field (I-x), I-x continues it (x). */
    private static String grobidLabel(String label) {
        if (label.equals("O")) {
            return "<other>";
        }
        if (label.startsWith("B-")) {
            return "I-" + label.substring(2);
        }
        if (label.startsWith("I-")) {
            return label.substring(2);
        }
        return label;
    }

    /**
     * Loads the model, labels every document of {@code documents} from this thread ({@code
     * single-D.txt}), then from {@code threads} Java threads at once, each making {@code calls}
     * calls, thread t's call c on document (t + c) mod D ({@code thread-T-call-C-doc-D.txt}).
     */
    private static void labelDocuments(String model, String architecture, Path documents, int threads, int calls,
                                       Path out) throws Exception {
        initModel(model, architecture);
        List<String> texts = new ArrayList<>();
        for (int d = 0; Files.exists(documents.resolve("doc-" + d + ".txt")); d++) {
            texts.add(Files.readString(documents.resolve("doc-" + d + ".txt"), StandardCharsets.UTF_8));
        }
        for (int d = 0; d < texts.size(); d++) {
            write(out.resolve("single-" + d + ".txt"), label(model, architecture, texts.get(d)));
        }
        List<Thread> started = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int thread = t;
            Thread worker = new Thread(() -> {
                try {
                    for (int c = 0; c < calls; c++) {
                        int d = (thread + c) % texts.size();
                        String labelled = label(model, architecture, texts.get(d));
                        write(out.resolve("thread-" + thread + "-call-" + c + "-doc-" + d + ".txt"), labelled);
                    }
                } catch (Exception e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            worker.start();
            started.add(worker);
        }
        for (Thread worker : started) {
            worker.join();
        }
        if (!failures.isEmpty()) {
            throw new IllegalStateException("label() failed in a Java thread", failures.get(0));
        }
    }

    // ---------------------------------------------------------------- training

    /** GROBID's DeLFTModel.train: grobidTagger.py as a child process started in the bridge directory. */
    private static void train(String model, String architecture, String trainingFile, Path out) throws Exception {
        List<String> command = List.of("python3", "delft/applications/grobidTagger.py", model, "train",
            "--input", new File(trainingFile).getAbsolutePath(), "--output", MODELS, "--architecture", architecture);
        Process process = new ProcessBuilder(command).directory(new File(BRIDGE)).inheritIO().start();
        int code = process.waitFor();
        write(out.resolve("exit-code.txt"), String.valueOf(code));
    }

    // ---------------------------------------------------------------- files

    private static void write(Path path, String text) throws IOException {
        Files.writeString(path, text, StandardCharsets.UTF_8);
    }

    private static String stackTrace(Throwable e) {
        StringWriter text = new StringWriter();
        e.printStackTrace(new PrintWriter(text));
        return text.toString();
    }
}
