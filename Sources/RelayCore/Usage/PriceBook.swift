import JSON
import Support

/// The prices in force: the configuration's `pricing`, or its `pricingFile` read at start-up and again on SIGHUP
/// (`reload`). A reload that fails (unreadable file, bad JSON, a bad price) keeps the table in force and says why.
/// Read by every exchange at its end and by admissions with a dollar budget. The state is behind a lock (`Locked`): readers
/// on any loop queue, the reload on the signal queue.
package final class PriceBook: Sendable {
    /// `pricingFile`; nil when the prices are inline (a reload then has nothing to read).
    package let file: String?
    private let readFile: @Sendable (String) -> [UInt8]?
    private let state: Locked<State>

    struct State {
        var table: PriceTable
        /// Models already warned about as unpriced (bounded: `maxWarned`).
        var warned: Set<String> = []
    }

    /// How many unpriced model names are remembered for the warn-once rule: a client choosing model names cannot
    /// grow the set past this (past it, no further warning is logged).
    package static let maxWarned = 1_000

    /// `readFile` is how a reload reads `file` (the shell passes the file system's; tests a fake).
    package init(table: PriceTable, file: String? = nil, readFile: @escaping @Sendable (String) -> [UInt8]? = { _ in nil }) {
        self.file = file
        self.readFile = readFile
        self.state = Locked(State(table: table))
    }

    package var table: PriceTable { state.withLock { $0.table } }

    package func price(for model: String?) -> ModelPrice? { state.withLock { $0.table.price(for: model) } }

    /// True the first time `model` (nil: no model known) is reported unpriced in this process.
    package func firstWarning(for model: String?) -> Bool {
        state.withLock { s in
            let name = model ?? ""
            guard s.warned.count < Self.maxWarned || s.warned.contains(name) else { return false }
            return s.warned.insert(name).inserted
        }
    }

    /// Reads `pricingFile` again. On success the new table replaces the old whole; on failure nothing changes and the
    /// problems are returned (each with its key path).
    @discardableResult
    package func reload() -> Result<Int, ConfigurationError> {
        guard let file else { return .failure(ConfigurationError(problems: ["pricingFile: none configured (prices are inline)"])) }
        switch Self.load(file: file, readFile: readFile) {
        case .success(let table):
            state.withLock { $0.table = table }
            return .success(table.count)
        case .failure(let error):
            return .failure(error)
        }
    }

    /// Reads and checks a price file (the same JSON as `pricing`).
    static func load(file: String, readFile: (String) -> [UInt8]?) -> Result<PriceTable, ConfigurationError> {
        guard let bytes = readFile(file) else { return .failure(ConfigurationError(problems: ["pricingFile: cannot read \(file)"])) }
        let document: JSONDocument
        do {
            document = try JSONDocument(parsing: bytes)
        } catch {
            return .failure(ConfigurationError(problems: ["pricingFile: \(file) is not valid JSON (\(error))"]))
        }
        let (table, problems) = PriceTable.read(document, at: JSONDocument.root, path: "pricingFile")
        guard let table else { return .failure(ConfigurationError(problems: problems)) }
        return .success(table)
    }
}
