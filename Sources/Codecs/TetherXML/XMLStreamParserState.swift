import CExpat
import TetherCore

/// The mutable state Expat's callbacks work on (reached through Expat's user data pointer).
@safe struct XMLStreamParserState: ~Copyable {
    let configuration: XMLStreamParser.Configuration
    /// The Expat parser the callbacks run for (the parser struct owns and frees it).
    let parser: XML_Parser
    var builder = XMLTreeBuilder()
    var names: XMLNameCache
    /// Namespace declarations reported for the element about to start (name-table indices).
    var declarations = PlainBuffer<UInt32>(capacity: 8)
    /// Namespace declarations reported for the stream header.
    var headerDeclarations: [XMLNamespaceDeclaration] = []
    /// The open stream's root name and declarations (to replay after releasing the buffers).
    var openHeader: (name: XMLName, declarations: [XMLNamespaceDeclaration])?
    /// Scratch space for the cache key of a namespace declaration.
    var declarationKey = PlainBuffer<UInt8>(capacity: 64)

    /// Open elements, the stream root included.
    var depth = 0
    /// Elements in the current top-level element.
    var elementCount = 0
    var event: XMLStreamEvent?
    /// The stream's root ended in the token that opened it (`<stream/>`): `.streamClose` follows
    /// the `.streamOpen` still in `event`.
    var closesAfterEvent = false
    /// The stream's closing tag was read: nothing after it is parsed (the peer ends the
    /// connection next; bytes it sends first are dropped, not buffered).
    var ended = false
    var failure: XMLStreamError?
    var suspended = false

    /// Bytes received but not yet fed to Expat.
    var pending: [UInt8] = []
    /// The bytes of the last `XML_Parse` call (kept to find what follows an event).
    var chunk: [UInt8] = []
    /// The stream offset of `chunk`'s first byte.
    var chunkStart = 0
    /// Bytes fed to Expat since the stream (re)started.
    var totalFed = 0
    /// The stream offset just after the last event (or ignored text between elements).
    var lastBoundary = 0
    /// The stream offset where the current top-level element starts.
    var elementStart = 0

    init(configuration: XMLStreamParser.Configuration, parser: XML_Parser) {
        self.configuration = configuration
        unsafe self.parser = parser
        names = XMLNameCache(capacity: configuration.nameCacheCapacity)
    }

    var hasPendingBytes: Bool {
        !ended && (!pending.isEmpty || suspended || totalFed > lastBoundary)
    }

    /// Whether there are bytes to feed Expat: the stream's first two bytes go in together, so
    /// that `takePending` judges its opening the same however the reads were cut.
    var canFeed: Bool {
        !ended && (totalFed > 0 ? !pending.isEmpty : pending.count >= 2)
    }

    /// Inside the stream, between top-level elements, with nothing buffered or waiting.
    var isIdle: Bool {
        failure == nil && event == nil && depth == 1 && !hasPendingBytes
    }

    /// The open stream's header as bytes that recreate its root element and namespace scope.
    func replayableHeader() -> [UInt8]? {
        guard let (name, declarations) = openHeader else { return nil }
        var bytes = Array("<".utf8)
        if let prefix = name.prefix, !prefix.isEmpty { bytes += prefix.utf8 + [UInt8(ascii: ":")] }
        bytes += name.local.utf8
        for declaration in declarations {
            bytes += " xmlns".utf8
            if let prefix = declaration.prefix { bytes += [UInt8(ascii: ":")] + prefix.utf8 }
            bytes += "='".utf8
            XMLSerializer.appendAttributeValue(declaration.uri, &bytes)
            bytes.append(UInt8(ascii: "'"))
        }
        bytes.append(UInt8(ascii: ">"))
        return bytes
    }

    mutating func reset() {
        builder.reset()
        declarations.removeAll()
        headerDeclarations.removeAll(keepingCapacity: true)
        openHeader = nil
        depth = 0
        elementCount = 0
        event = nil
        closesAfterEvent = false
        ended = false
        failure = nil
        suspended = false
        pending.removeAll(keepingCapacity: true)
        chunk.removeAll(keepingCapacity: true)
        chunkStart = 0
        totalFed = 0
        lastBoundary = 0
        elementStart = 0
    }

    /// Moves the pending bytes to `chunk` for feeding; false (and a failure) if the stream does
    /// not start as UTF-8.
    mutating func takePending() -> Bool {
        swap(&chunk, &pending)
        pending.removeAll(keepingCapacity: true)
        chunkStart = totalFed
        // A UTF-8 stream starts with '<' or whitespace. A first byte 0xEF, 0xFE or 0xFF starts a
        // byte-order mark; a zero byte in either of the first two makes Expat take the stream for
        // UTF-16 whatever encoding it was told. Both are refused (`canFeed` holds the first byte
        // back until the second arrives, so this sees both at once).
        if totalFed == 0, chunk.count >= 2,
            chunk[0] == 0xEF || chunk[0] == 0xFE || chunk[0] == 0xFF || chunk[0] == 0 || chunk[1] == 0
        {
            fail(.init(.unsupportedEncoding, "the stream does not start as UTF-8 text (byte-order mark or UTF-16?)"))
            return false
        }
        totalFed += chunk.count
        return true
    }

    /// Takes note of what an `XML_Parse`/`XML_ResumeParser` call returned.
    mutating func parsed(_ status: XML_Status) {
        switch status {
        case XML_STATUS_SUSPENDED:
            suspended = true
        case XML_STATUS_OK:
            suspended = false
            chunk.removeAll(keepingCapacity: true)
        default:
            suspended = false
            fail(XMLStreamParser.error(for: unsafe XML_GetErrorCode(parser)))
        }
        // Bound what the parser holds: the current element (or the bytes since the last
        // element, such as an unfinished start tag) must stay within the size limit. Only once
        // Expat has consumed the whole chunk: when it suspended at an element's end, the bytes
        // after that are not parsed yet (a read holding many small elements is not one large one).
        if failure == nil, !suspended, totalFed - lastBoundary > configuration.maximumElementSize {
            tooLarge()
        }
    }

    /// The bytes received after the last event.
    func unconsumedBytes() -> [UInt8] {
        var remainder: [UInt8] = []
        if suspended || !chunk.isEmpty {
            let offset = max(0, lastBoundary - chunkStart)
            if offset < chunk.count { remainder.append(contentsOf: chunk[offset...]) }
        }
        remainder.append(contentsOf: pending)
        return remainder
    }

    /// Whether the current top-level element has grown past the size limit.
    func elementTooLarge() -> Bool {
        currentEnd() - elementStart > configuration.maximumElementSize
    }

    mutating func fail(_ error: XMLStreamError) {
        if failure == nil { failure = error }
        builder.reset()
        pending.removeAll()
        chunk.removeAll()
    }

    /// Fails the stream and aborts parsing.
    mutating func abort(_ error: XMLStreamError) {
        fail(error)
        _ = unsafe XML_StopParser(parser, 0)
    }

    mutating func tooLarge() {
        abort(.init(.policyViolation, "element larger than \(configuration.maximumElementSize) bytes"))
    }

    mutating func tooManyAttributes() {
        let limit = configuration.maximumAttributes
        abort(.init(.policyViolation, "more than \(limit) attributes (namespace declarations included)"))
    }

    /// Ends the current `XML_Parse`/`XML_ResumeParser` call after an event (resumable), noting
    /// where the event's bytes end.
    mutating func stopAfterEvent() {
        lastBoundary = currentEnd()
        _ = unsafe XML_StopParser(parser, 1)
    }

    /// The stream offset just after the current event.
    func currentEnd() -> Int {
        Int(unsafe XML_GetCurrentByteIndex(parser)) + Int(unsafe XML_GetCurrentByteCount(parser))
    }

    // MARK: Callbacks

    mutating func startElement(
        _ rawName: UnsafePointer<CChar>,
        _ rawAttributes: UnsafeMutablePointer<UnsafePointer<CChar>?>?
    ) {
        guard failure == nil else { return }
        let limits = configuration
        if depth == 0 {
            return unsafe startStream(rawName, rawAttributes)
        }
        // Namespace declarations (already reported) count as attributes.
        let declared = declarations.count
        if depth == 1 {
            elementCount = 0
            elementStart = Int(unsafe XML_GetCurrentByteIndex(parser))
            // (When the element declares namespaces, `startNamespace` started the tree.)
            if declared == 0 { names.startTree() }
        }
        elementCount += 1
        guard depth <= limits.maximumDepth else {
            return abort(.init(.policyViolation, "elements nested deeper than \(limits.maximumDepth)"))
        }
        guard elementCount <= limits.maximumElements else {
            return abort(.init(.policyViolation, "more than \(limits.maximumElements) elements in one element"))
        }
        let name = unsafe names.index(of: rawName, count: strlen(rawName), make: Self.name)
        let element = builder.startElement(name)
        if !declarations.isEmpty {
            for index in 0..<declarations.count { builder.namespaceDeclaration(declarations[index]) }
            declarations.removeAll()
        }
        if let rawAttributes = unsafe rawAttributes {
            var index = 0
            while let attributeName = unsafe rawAttributes[index], let value = unsafe rawAttributes[index + 1] {
                guard declared + index / 2 < limits.maximumAttributes else { return tooManyAttributes() }
                let name = unsafe names.index(of: attributeName, count: strlen(attributeName), make: Self.name)
                unsafe builder.attribute(name, bytes: UnsafeRawPointer(value), count: strlen(value))
                index += 2
            }
            // Attribute values count like text (see `characters`): bounded while arriving.
            guard builder.text.count <= limits.maximumElementSize else { return tooLarge() }
        }
        builder.endHeader(of: element)
        depth += 1
    }

    /// The stream header (the root element's start tag).
    private mutating func startStream(
        _ rawName: UnsafePointer<CChar>,
        _ rawAttributes: UnsafeMutablePointer<UnsafePointer<CChar>?>?
    ) {
        let name = unsafe names.name(of: rawName, count: strlen(rawName), make: Self.name)
        var attributes: [XMLAttribute] = []
        if let rawAttributes = unsafe rawAttributes {
            var index = 0
            while let attributeName = unsafe rawAttributes[index], let value = unsafe rawAttributes[index + 1] {
                guard headerDeclarations.count + index / 2 < configuration.maximumAttributes else {
                    return tooManyAttributes()
                }
                let attribute = unsafe names.name(of: attributeName, count: strlen(attributeName), make: Self.name)
                unsafe attributes.append(XMLAttribute(attribute, String(cString: value)))
                index += 2
            }
        }
        event = .streamOpen(
            XMLStreamHeader(name: name, attributes: attributes, namespaceDeclarations: headerDeclarations)
        )
        openHeader = (name, headerDeclarations)
        headerDeclarations.removeAll(keepingCapacity: true)
        depth = 1
        stopAfterEvent()
    }

    mutating func endElement() {
        guard failure == nil else { return }
        depth -= 1
        if depth == 0 {
            ended = true
            pending.removeAll()
            // An empty root (`<stream/>`) ends in the token that opened it, whose event is
            // still waiting.
            if event == nil { event = .streamClose } else { closesAfterEvent = true }
            stopAfterEvent()
            return
        }
        builder.endElement()
        if depth == 1 {
            guard !elementTooLarge() else { return tooLarge() }
            event = .element(builder.finish(sharing: names.table))
            stopAfterEvent()
        }
    }

    mutating func characters(_ text: UnsafePointer<CChar>, _ length: Int) {
        guard failure == nil else { return }
        if depth >= 2 {
            // Text and attribute values are never longer than the raw bytes they came from, so
            // this bounds memory while the element arrives, without asking Expat for positions;
            // the element's exact raw size is checked when it ends and after every parse call.
            guard builder.text.count + length <= configuration.maximumElementSize else { return tooLarge() }
            unsafe builder.characters(UnsafeRawPointer(text), count: length)
        } else {
            // Text directly inside the stream element (whitespace keep-alives) is ignored.
            lastBoundary = currentEnd()
        }
    }

    mutating func startNamespace(_ prefix: UnsafePointer<CChar>?, _ uri: UnsafePointer<CChar>?) {
        guard failure == nil else { return }
        if depth == 0 {
            guard headerDeclarations.count < configuration.maximumAttributes else { return tooManyAttributes() }
            unsafe headerDeclarations.append(
                XMLNamespaceDeclaration(
                    prefix: prefix.map { unsafe String(cString: $0) },
                    uri: uri.map { unsafe String(cString: $0) } ?? ""
                )
            )
            return
        }
        guard declarations.count < configuration.maximumAttributes else { return tooManyAttributes() }
        // A top-level element's tree starts with its first declaration's name.
        if depth == 1 && declarations.isEmpty { names.startTree() }
        // The key: 0x1E (never in a name, so no element or attribute name collides), the prefix,
        // 0x1F, the URI.
        declarationKey.removeAll()
        declarationKey.append(0x1E)
        if let prefix = unsafe prefix { unsafe declarationKey.append(bytes: prefix, count: strlen(prefix)) }
        declarationKey.append(0x1F)
        if let uri = unsafe uri { unsafe declarationKey.append(bytes: uri, count: strlen(uri)) }
        let index = unsafe declarationKey.withUnsafeBufferPointer { key in
            unsafe names.index(of: key.baseAddress!, count: key.count, make: Self.declarationName)
        }
        declarations.append(index)
    }

    /// The name for Expat's triplet `uri␟local␟prefix`, `uri␟local` or `local` (valid UTF-8).
    static func name(_ bytes: UnsafeRawBufferPointer) -> XMLName {
        guard let first = unsafe bytes.firstIndex(of: 0x1F) else {
            return unsafe XMLName(String(decoding: bytes, as: UTF8.self))
        }
        let namespace = unsafe String(decoding: bytes[..<first], as: UTF8.self)
        let rest = unsafe bytes[(first + 1)...]
        guard let second = unsafe rest.firstIndex(of: 0x1F) else {
            return unsafe XMLName(String(decoding: rest, as: UTF8.self), namespace: namespace)
        }
        return unsafe XMLName(
            String(decoding: bytes[(first + 1)..<second], as: UTF8.self),
            namespace: namespace,
            prefix: String(decoding: bytes[(second + 1)...], as: UTF8.self)
        )
    }

    /// The name for a declaration key `0x1E prefix 0x1F uri`: prefix and URI.
    static func declarationName(_ bytes: UnsafeRawBufferPointer) -> XMLName {
        let separator = unsafe bytes.firstIndex(of: 0x1F)!
        let prefix = unsafe String(decoding: bytes[1..<separator], as: UTF8.self)
        let uri = unsafe String(decoding: bytes[(separator + 1)...], as: UTF8.self)
        return XMLName("", namespace: uri, prefix: prefix.isEmpty ? nil : prefix)
    }
}

// MARK: - Expat callbacks (C function pointers; the state arrives as user data)

func parserState(_ userData: UnsafeMutableRawPointer?) -> UnsafeMutablePointer<XMLStreamParserState> {
    unsafe userData!.assumingMemoryBound(to: XMLStreamParserState.self)
}

let xmlStartElement: XML_StartElementHandler = { userData, rawName, rawAttributes in
    guard let rawName = unsafe rawName else { return }
    unsafe parserState(userData).pointee.startElement(rawName, rawAttributes)
}

let xmlEndElement: XML_EndElementHandler = { userData, _ in
    unsafe parserState(userData).pointee.endElement()
}

let xmlCharacters: XML_CharacterDataHandler = { userData, text, length in
    guard let text = unsafe text else { return }
    unsafe parserState(userData).pointee.characters(text, Int(length))
}

let xmlStartNamespace: XML_StartNamespaceDeclHandler = { userData, prefix, uri in
    unsafe parserState(userData).pointee.startNamespace(prefix, uri)
}

let xmlDeclaration: XML_XmlDeclHandler = { userData, _, encoding, _ in
    guard let encoding = unsafe encoding.map({ unsafe String(cString: $0) }), encoding.lowercased() != "utf-8" else {
        return
    }
    unsafe parserState(userData).pointee.abort(
        .init(.unsupportedEncoding, "the XML declaration names the encoding \(encoding)")
    )
}

let xmlComment: XML_CommentHandler = { userData, _ in
    unsafe parserState(userData).pointee.abort(.init(.restrictedXML, "comment"))
}

let xmlProcessingInstruction: XML_ProcessingInstructionHandler = { userData, _, _ in
    unsafe parserState(userData).pointee.abort(.init(.restrictedXML, "processing instruction"))
}

let xmlDoctype: XML_StartDoctypeDeclHandler = { userData, _, _, _, _ in
    unsafe parserState(userData).pointee.abort(.init(.restrictedXML, "document type declaration"))
}

let xmlEntityDeclaration: XML_EntityDeclHandler = { userData, _, _, _, _, _, _, _, _ in
    unsafe parserState(userData).pointee.abort(.init(.restrictedXML, "entity declaration"))
}
