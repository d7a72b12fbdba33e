import CExpat
import Foundation
import TetherXML

/// XMPP benchmarks: raw Expat with no-op callbacks (the same-run baseline), full decoding into
/// element trees through `XMLStreamParser`, and serialisation of the decoded stanzas.
struct XMPPBenchmarks {
    static let names = ["expat-raw (baseline)", "expat-raw-suspending", "xmpp-decode", "xmpp-serialize"]

    let corpus: XMPPCorpus
    let chunkSize = 65536
    let passes: Int

    /// Raw Expat, namespace-aware with triplets, no-op callbacks, 64 KiB chunks; returns the
    /// number of depth-1 elements seen.
    func rawExpat(suspending: Bool = false) -> Int {
        final class Counter {
            var depth = 0
            var elements = 0
            var suspend = false
            var parser: XML_Parser?
        }
        let counter = Counter()
        counter.suspend = suspending
        let parser = XML_ParserCreateNS("UTF-8", 0x1F)!
        defer { XML_ParserFree(parser) }
        XML_SetReturnNSTriplet(parser, 1)
        _ = cexpat_disable_reparse_deferral(parser)
        counter.parser = parser
        XML_SetUserData(parser, Unmanaged.passUnretained(counter).toOpaque())
        XML_SetElementHandler(
            parser,
            { userData, _, _ in
                Unmanaged<Counter>.fromOpaque(userData!).takeUnretainedValue().depth += 1
            },
            { userData, _ in
                let counter = Unmanaged<Counter>.fromOpaque(userData!).takeUnretainedValue()
                counter.depth -= 1
                if counter.depth == 1 {
                    counter.elements += 1
                    if counter.suspend { XML_StopParser(counter.parser, 1) }
                }
            }
        )
        XML_SetCharacterDataHandler(parser) { _, _, _ in }
        corpus.stream.withUnsafeBufferPointer { buffer in
            var offset = 0
            while offset < buffer.count {
                let length = min(chunkSize, buffer.count - offset)
                let start = UnsafeRawPointer(buffer.baseAddress! + offset).assumingMemoryBound(to: CChar.self)
                var status = XML_Parse(parser, start, Int32(length), 0)
                while status == XML_STATUS_SUSPENDED { status = XML_ResumeParser(parser) }
                offset += length
            }
        }
        return counter.elements
    }

    /// Full decoding into trees; returns a checksum (and keeps the last stanzas for serialising).
    func decode(keeping kept: inout [XMLElement], keep: Int = 0) throws -> Int {
        var parser = XMLStreamParser()
        var checksum = 0
        var offset = 0
        while offset < corpus.stream.count {
            let end = min(offset + chunkSize, corpus.stream.count)
            parser.append(corpus.stream.span.extracting(offset..<end))
            offset = end
            while let event = try parser.next() {
                if case .element(let element) = event {
                    checksum &+= element.localName.utf8.count
                    if kept.count < keep { kept.append(element) }
                }
            }
        }
        return checksum
    }

    func run(filter: (String) -> Bool, progress: (String) -> Void) throws -> [BenchmarkResult] {
        var results: [BenchmarkResult] = []
        let stanzas = corpus.stanzaCount + 1  // + stream:features
        var baseline: BenchmarkResult?
        if filter("expat-raw (baseline)") || filter("xmpp-decode") || filter("expat-raw-suspending") {
            progress("expat-raw (baseline)")
            baseline = measure("expat-raw (baseline)", bytes: corpus.stream.count, messages: stanzas, passes: passes) {
                rawExpat()
            }
            results.append(baseline!)
        }
        if filter("expat-raw-suspending") {
            progress("expat-raw-suspending")
            var result = measure("expat-raw-suspending", bytes: corpus.stream.count, messages: stanzas, passes: passes)
            {
                rawExpat(suspending: true)
            }
            if let baseline { result.note = String(format: "%.2fx raw Expat time", result.seconds / baseline.seconds) }
            results.append(result)
        }
        if filter("xmpp-decode") {
            progress("xmpp-decode")
            let rssBefore = residentSetSize()
            var none: [XMLElement] = []
            var result = try measure("xmpp-decode", bytes: corpus.stream.count, messages: stanzas, passes: passes) {
                try decode(keeping: &none)
            }
            let growth = max(0, result.peakRSS - rssBefore)
            if let baseline {
                result.note = String(
                    format: "%.2fx raw Expat time; RSS +%.1f MiB",
                    result.seconds / baseline.seconds,
                    Double(growth) / 1_048_576
                )
            }
            results.append(result)
        }
        if filter("xmpp-serialize") {
            progress("xmpp-serialize")
            var kept: [XMLElement] = []
            _ = try decode(keeping: &kept, keep: corpus.stanzaCount + 1)
            var output: [UInt8] = []
            output.reserveCapacity(corpus.stream.count + 1024)
            let size: Int = {
                var bytes: [UInt8] = []
                for element in kept { XMLSerializer.write(element, in: .clientStream, into: &bytes) }
                return bytes.count
            }()
            results.append(
                measure("xmpp-serialize", bytes: size, messages: kept.count, passes: passes) {
                    output.removeAll(keepingCapacity: true)
                    for element in kept { XMLSerializer.write(element, in: .clientStream, into: &output) }
                    return output.count
                }
            )
        }
        return results
    }
}
