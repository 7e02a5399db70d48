// Golden-vector generator for tests/unit/test_partitioner.py (run: java Murmur2Golden.java).
// Java int arithmetic (32-bit wraparound, >>> logical shift) is the reference that
// odradek.client.partitioner.murmur2 must agree with. Prints: hex-input murmur2 partition-of-7.
import java.nio.charset.StandardCharsets;
import java.util.Random;

public class Murmur2Golden {
    static int murmur2(byte[] data) {
        int length = data.length;
        int m = 0x5bd1e995;
        int r = 24;
        int h = 0x9747b28c ^ length;
        int words = length / 4;
        for (int i = 0; i < words; i++) {
            int base = i * 4;
            int k = (data[base] & 0xff) | ((data[base + 1] & 0xff) << 8)
                    | ((data[base + 2] & 0xff) << 16) | ((data[base + 3] & 0xff) << 24);
            k *= m;
            k ^= k >>> r;
            k *= m;
            h *= m;
            h ^= k;
        }
        int tail = length & ~3;
        switch (length % 4) {
            case 3: h ^= (data[tail + 2] & 0xff) << 16;
            case 2: h ^= (data[tail + 1] & 0xff) << 8;
            case 1: h ^= data[tail] & 0xff; h *= m;
        }
        h ^= h >>> 13;
        h *= m;
        h ^= h >>> 15;
        return h;
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x & 0xff));
        return sb.length() == 0 ? "-" : sb.toString();
    }

    static void emit(byte[] b) {
        int h = murmur2(b);
        System.out.println(hex(b) + " " + h + " " + ((h & 0x7fffffff) % 7));
    }

    public static void main(String[] args) {
        String[] words = {"", "a", "ab", "abc", "21", "foobar", "a-little-bit-long-string",
                "a-little-bit-longer-string", "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                "key-0", "key-1", "user-42", "\u00e9t\u00e9"};
        for (String w : words) emit(w.getBytes(StandardCharsets.UTF_8));
        Random rnd = new Random(480);
        for (int i = 0; i < 40; i++) {
            byte[] b = new byte[rnd.nextInt(40)];
            rnd.nextBytes(b);
            emit(b);
        }
    }
}
