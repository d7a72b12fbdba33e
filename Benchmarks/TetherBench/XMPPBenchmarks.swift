import CExpat
import Foundation
import TetherCore
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
    func decode(keeping kept: inout [XElement], keep: Int = 0) throws -> Int {
        var parser = XMLStreamParser()
        var checksum = 0
        var offset = 0
        while offset < corpus.stream.count {
            let end = min(offset + chunkSize, corpus.stream.count)
            parser.append(corpus.stream.backDeployedSpan.extracting(offset..<end))
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
        let bytes = corpus.stream.count
        // The baseline and the decoder run alternately, pass by pass, so that their ratio is not
        // skewed by a slow spell of the machine during one of them.
        var group: [(name: String, bytes: Int, messages: Int, body: () throws -> Int)] = []
        if filter("expat-raw (baseline)") || filter("xmpp-decode") || filter("expat-raw-suspending") {
            group.append(("expat-raw (baseline)", bytes, stanzas, { rawExpat() }))
        }
        if filter("expat-raw-suspending") {
            group.append(("expat-raw-suspending", bytes, stanzas, { rawExpat(suspending: true) }))
        }
        var none: [XElement] = []
        if filter("xmpp-decode") {
            group.append(("xmpp-decode", bytes, stanzas, { try decode(keeping: &none) }))
        }
        if !group.isEmpty {
            progress(group.map(\.name).joined(separator: ", "))
            let rssBefore = residentSetSize()
            var measured = try measureAlternating(group, passes: passes)
            let baseline = measured.first { $0.name == "expat-raw (baseline)" }
            for index in measured.indices where measured[index].name != "expat-raw (baseline)" {
                guard let baseline else { break }
                let ratio = measured[index].seconds / baseline.seconds
                if measured[index].name == "xmpp-decode" {
                    let growth = max(0, measured[index].peakRSS - rssBefore)
                    measured[index].note = String(
                        format: "%.2fx raw Expat time; RSS +%.1f MiB",
                        ratio,
                        Double(growth) / 1_048_576
                    )
                } else {
                    measured[index].note = String(format: "%.2fx raw Expat time", ratio)
                }
            }
            results += measured
        }
        if filter("xmpp-serialize") {
            progress("xmpp-serialize")
            var kept: [XElement] = []
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
