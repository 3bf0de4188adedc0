.data
X: .fp16 70000
