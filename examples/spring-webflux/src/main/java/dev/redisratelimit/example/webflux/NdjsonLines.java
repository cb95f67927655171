package dev.redisratelimit.example.webflux;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.reactivestreams.Publisher;
import org.springframework.core.ResolvableType;
import org.springframework.core.codec.AbstractEncoder;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferFactory;
import org.springframework.http.MediaType;
import org.springframework.http.codec.HttpMessageEncoder;
import org.springframework.util.MimeType;
import reactor.core.publisher.Flux;

/**
 * Writes endpoint 6's {@link LlmStream.Line}s as they are, one flush each
 * (a streaming media type), including the empty first one that commits the
 * headers. Registered in {@link Codecs}.
 */
final class NdjsonLines extends AbstractEncoder<LlmStream.Line> implements HttpMessageEncoder<LlmStream.Line> {

    NdjsonLines() {
        super(MediaType.APPLICATION_NDJSON);
    }

    @Override
    public boolean canEncode(ResolvableType type, MimeType mime) {
        return LlmStream.Line.class.isAssignableFrom(type.toClass()) && super.canEncode(type, mime);
    }

    @Override
    public Flux<DataBuffer> encode(Publisher<? extends LlmStream.Line> lines, DataBufferFactory buffers, ResolvableType type,
            MimeType mime, Map<String, Object> hints) {
        return Flux.from(lines).map(line -> encodeValue(line, buffers, type, mime, hints));
    }

    @Override
    public DataBuffer encodeValue(LlmStream.Line line, DataBufferFactory buffers, ResolvableType type, MimeType mime,
            Map<String, Object> hints) {
        return buffers.wrap(line.ndjson().getBytes(StandardCharsets.UTF_8));
    }

    @Override
    public List<MediaType> getStreamingMediaTypes() {
        return List.of(MediaType.APPLICATION_NDJSON);
    }
}
