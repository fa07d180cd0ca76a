#if !FUZZING
import Foundation

/// Without libFuzzer (a normal build), the same target replays files or folders of inputs: the seed corpus in
/// `make test`, and any crash file a fuzzing run left behind.
@main
struct Replay {
    static func main() {
        var count = 0
        for path in CommandLine.arguments.dropFirst() {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("no such input: \(path)\n".utf8))
                exit(2)
            }
            let files = isDirectory.boolValue
                ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { "\(path)/\($0)" }
                : [path]
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                data.withUnsafeBytes { RequestParserFuzzer.run($0) }
                count += 1
            }
        }
        print("replayed \(count) inputs without a finding")
    }
}
#endif
